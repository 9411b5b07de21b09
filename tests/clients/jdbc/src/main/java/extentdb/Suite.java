package extentdb;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * The runner and assertions the Java client suites share: named test bodies run in order,
 * one line each ("ok   CLIENT name" or "FAIL CLIENT name: why"), then "N passed, N failed"
 * (what crates/cli/tests/tds_clients.rs reads).
 */
final class Suite {
    interface Body {
        void run() throws Exception;
    }

    /** An assertion that did not hold (printed without a stack trace). */
    static final class Failure extends RuntimeException {
        Failure(String m) {
            super(m);
        }
    }

    private final String client;
    private final List<String> names = new ArrayList<>();
    private final List<Body> bodies = new ArrayList<>();

    Suite(String client) {
        this.client = client;
    }

    void test(String name, Body body) {
        names.add(name);
        bodies.add(body);
    }

    /** Runs the tests whose name contains `filter` (all when null); exits 1 if any failed. */
    void runAndExit(String filter) {
        int passed = 0;
        int failed = 0;
        for (int i = 0; i < names.size(); i++) {
            if (filter != null && !names.get(i).contains(filter)) {
                continue;
            }
            try {
                bodies.get(i).run();
                passed++;
                System.out.println("ok   " + client + " " + names.get(i));
            } catch (Throwable t) {
                failed++;
                System.out.println("FAIL " + client + " " + names.get(i) + ": " + t);
                if (!(t instanceof Failure)) {
                    t.printStackTrace(System.out);
                }
            }
        }
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }

    static void eq(Object actual, Object expected, String what) {
        boolean same = expected instanceof byte[] && actual instanceof byte[]
                ? Arrays.equals((byte[]) expected, (byte[]) actual)
                : Objects.equals(actual, expected);
        if (!same) {
            throw new Failure(what + ": expected " + show(expected) + ", got " + show(actual));
        }
    }

    static String show(Object o) {
        if (o instanceof byte[]) {
            return Arrays.toString((byte[]) o);
        }
        return o == null ? "null" : o + " (" + o.getClass().getSimpleName() + ")";
    }

    static void check(boolean cond, String what) {
        if (!cond) {
            throw new Failure(what);
        }
    }
}
