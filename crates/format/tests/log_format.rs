//! The log's end is found from sector parity and block checksums, never a stored pointer:
//! these tests cut, tear and overwrite VLF images and check the scan stops exactly at the
//! last block that was completely written in the VLF's current use.

use extentdb_format::log::{
    self, decode_block, encode_block, scan_vlf, VlfHeader, PARITY_FIRST, PARITY_SECOND,
    VLF_HEADER_AREA,
};
use extentdb_format::{Lsn, SECTOR_SIZE};

const VLF_SIZE: usize = 256 * 1024;

/// Records of varied sizes, deterministic per seed, so blocks span 1 to many sectors.
fn records(seed: u64, n: usize) -> Vec<Vec<u8>> {
    let mut x = seed | 1;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 3000) as usize;
            vec![(i as u8) ^ (x as u8); len]
        })
        .collect()
}

/// Writes `count` blocks of one use into `image`; returns (offset, sectors) of each.
fn write_use(
    image: &mut [u8],
    sequence: u32,
    parity: u8,
    count: usize,
    seed: u64,
) -> Vec<(u32, u32, Vec<Vec<u8>>)> {
    let mut pos = VLF_HEADER_AREA as usize;
    let mut out = Vec::new();
    for b in 0..count {
        let recs = records(seed + b as u64, 1 + b % 4);
        let refs: Vec<&[u8]> = recs.iter().map(|r| r.as_slice()).collect();
        let offset = (pos / SECTOR_SIZE) as u32;
        let bytes = encode_block(&refs, sequence, offset, parity);
        if pos + bytes.len() > image.len() {
            break;
        }
        image[pos..pos + bytes.len()].copy_from_slice(&bytes);
        out.push((offset, (bytes.len() / SECTOR_SIZE) as u32, recs));
        pos += bytes.len();
    }
    out
}

/// Proves a block round-trips with its records and is refused under any other sequence,
/// offset or parity.
#[test]
fn block_round_trip() {
    let recs = records(3, 5);
    let refs: Vec<&[u8]> = recs.iter().map(|r| r.as_slice()).collect();
    let bytes = encode_block(&refs, 7, 16, PARITY_FIRST);
    let b = decode_block(&bytes, 7, 16, PARITY_FIRST).unwrap();
    assert_eq!(b.records, recs);
    assert!(decode_block(&bytes, 8, 16, PARITY_FIRST).is_none());
    assert!(decode_block(&bytes, 7, 17, PARITY_FIRST).is_none());
    assert!(decode_block(&bytes, 7, 16, PARITY_SECOND).is_none());
    let h = VlfHeader {
        sequence: 7,
        parity: PARITY_FIRST,
        file_id: 2,
        start_offset: 8192,
        size: VLF_SIZE as u64,
        create_lsn: Lsn::ZERO,
    };
    assert_eq!(VlfHeader::decode(&h.encode()), Some(h));
}

/// Cuts the log at every sector boundary (everything after the cut still initialized
/// zeros) and checks the scan returns exactly the blocks wholly before the cut.
#[test]
fn log_cut_at_every_sector_boundary() {
    let mut full = vec![0u8; VLF_SIZE];
    let written = write_use(&mut full, 1, PARITY_FIRST, 40, 11);
    let end = written.last().map(|(o, s, _)| (o + s) as usize).unwrap();
    for cut in (VLF_HEADER_AREA as usize / SECTOR_SIZE)..=end {
        let mut image = vec![0u8; VLF_SIZE];
        image[..cut * SECTOR_SIZE].copy_from_slice(&full[..cut * SECTOR_SIZE]);
        let found = scan_vlf(&image, 1, PARITY_FIRST);
        let expected: Vec<_> = written
            .iter()
            .filter(|(o, s, _)| (o + s) as usize <= cut)
            .collect();
        assert_eq!(found.len(), expected.len(), "cut at sector {cut}");
        for (f, (o, _, recs)) in found.iter().zip(expected) {
            assert_eq!((f.offset, &f.records), (*o, recs));
        }
    }
}

/// Tears the last block (any subset of its sectors left from the previous use) and checks
/// it is never accepted, while every earlier block is.
#[test]
fn torn_last_block_ends_the_log() {
    let mut old = vec![0u8; VLF_SIZE];
    write_use(&mut old, 1, PARITY_FIRST, 60, 5);
    let mut new = old.clone();
    let written = write_use(&mut new, 2, PARITY_SECOND, 12, 9);
    let (last_off, last_sectors, _) = written.last().cloned().unwrap();
    let mut x = 0x1234_5678u64;
    for _ in 0..300 {
        let mut image = new.clone();
        let mut kept_all = true;
        for s in last_off..last_off + last_sectors {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x.is_multiple_of(2) {
                let r = s as usize * SECTOR_SIZE..(s as usize + 1) * SECTOR_SIZE;
                image[r.clone()].copy_from_slice(&old[r]);
                kept_all = false;
            }
        }
        let found = scan_vlf(&image, 2, PARITY_SECOND);
        let expected = if kept_all {
            written.len()
        } else {
            written.len() - 1
        };
        assert_eq!(found.len(), expected);
    }
}

/// A VLF reused twice: the third use has the first use's parity, so only the block header's
/// sequence tells the first use's leftover blocks from new ones. The scan must stop at the
/// third use's true end whatever lies beyond it.
#[test]
fn stale_blocks_from_earlier_uses_are_never_replayed() {
    let mut image = vec![0u8; VLF_SIZE];
    let first = write_use(&mut image, 10, PARITY_FIRST, 80, 1);
    let second = write_use(&mut image, 14, log::flip(PARITY_FIRST), 8, 2);
    let third = write_use(&mut image, 19, PARITY_FIRST, 3, 3);
    assert!(first.len() > second.len() && second.len() > third.len());
    let found = scan_vlf(&image, 19, PARITY_FIRST);
    assert_eq!(found.len(), third.len());
    assert_eq!(
        scan_vlf(&image, 14, PARITY_SECOND).len(),
        0,
        "the second use's blocks start where the third's are"
    );
}

/// Proves every byte of a block is covered by its sector's own check: a flip anywhere is
/// `Damaged` where the scan stops, while zeros and whole sectors of an older use are not.
#[test]
fn a_flipped_byte_is_damage_and_a_whole_old_sector_is_not() {
    use log::{classify_ending, Ending};
    let recs = records(5, 3);
    let refs: Vec<&[u8]> = recs.iter().map(|r| r.as_slice()).collect();
    let block = encode_block(&refs, 9, 16, PARITY_FIRST);
    assert!(block.len() >= 3 * SECTOR_SIZE, "a block of several sectors");
    for i in 0..block.len() {
        let mut b = block.clone();
        b[i] ^= 0x20;
        assert!(decode_block(&b, 9, 16, PARITY_FIRST).is_none(), "byte {i}");
        let got = classify_ending(&b, 9, 16, PARITY_FIRST);
        let sector = i / SECTOR_SIZE;
        assert_eq!(got, Ending::Damaged { sector }, "byte {i}");
    }
    let older = encode_block(&refs, 7, 16, PARITY_SECOND);
    let mut torn = block.clone();
    torn[SECTOR_SIZE..2 * SECTOR_SIZE].copy_from_slice(&older[SECTOR_SIZE..2 * SECTOR_SIZE]);
    assert_eq!(classify_ending(&torn, 9, 16, PARITY_FIRST), Ending::Stale);
    torn[SECTOR_SIZE..2 * SECTOR_SIZE].fill(0);
    assert_eq!(classify_ending(&torn, 9, 16, PARITY_FIRST), Ending::Stale);
    assert_eq!(classify_ending(&older, 9, 16, PARITY_FIRST), Ending::Stale);
    let zeros = vec![0u8; 4 * SECTOR_SIZE];
    assert_eq!(
        classify_ending(&zeros, 9, 16, PARITY_FIRST),
        Ending::Unwritten
    );
}
