//! Every TDS decoder extentdb runs on input from the network: the first byte picks one,
//! the rest is its input. Run with `cargo +nightly fuzz run decoders` from `fuzz/`.
#![no_main]

use extentdb_tds::client::ClientState;
use extentdb_tds::{login7, packet, prelogin, request};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, input)) = data.split_first() else {
        return;
    };
    match which % 7 {
        0 => drop(prelogin::decode(input)),
        1 => drop(login7::decode(input)),
        2 => drop(request::sql_batch(input)),
        3 => drop(request::rpc(input)),
        4 => drop(request::transaction_manager(input)),
        5 => drop(ClientState::default().decode(input)),
        _ => drop(packet::read_message(&mut &input[..], 4096, 64 << 10)),
    }
});
