// The torture suites' knobs. `make test` runs them in the short mode; `make torture` sets PREFSKV_TORTURE=long.
//
//   PREFSKV_TORTURE=long   the long mode (PREFSKV_LONG_TESTS=1 means the same)
//   TORTURE_SECONDS=N      the time budget of each torture test (default 60 short, 900 long): a loop stops
//                          at its count or its budget, whichever comes first, and reports what it did
//   TORTURE_KILLS=N        SIGKILLs of the crash torture (default 150 short, 3000 long)
//   TORTURE_DAMAGES=N      random damages of the corruption torture (default 400 short, 10000 long)
//   TORTURE_POWER_OPS=N    operations recorded by each power-loss simulation (default 150 short, 1500 long)
//   TORTURE_RACE_ROUNDS=N  opens and table lookups raced by a second writer (default 300 short, 3000 long;
//                          ConcurrentWriterTests: ten times that many reads, a third to a thirtieth of it of the rest)
//   TORTURE_REPORT=PATH    also append every summary line to PATH (make torture collects them there)
import Foundation
import TestSupport

enum Torture {
    static let environment = ProcessInfo.processInfo.environment

    static let long = environment["PREFSKV_TORTURE"] == "long" || environment["PREFSKV_LONG_TESTS"] == "1"

    /// A count from `TORTURE_<name>`, else the mode's default.
    static func count(_ name: String, short: Int, long: Int) -> Int {
        environment["TORTURE_" + name].flatMap(Int.init) ?? (self.long ? long : short)
    }

    /// The time budget of one torture test, in seconds.
    static var seconds: Double {
        environment["TORTURE_SECONDS"].flatMap(Double.init) ?? (long ? 900 : 60)
    }

    /// A deadline `seconds` from now.
    static func deadline() -> Date { Date().addingTimeInterval(seconds) }

    /// Prints a summary line (and appends it to `TORTURE_REPORT` when set).
    static func report(_ line: String) {
        TortureReport.line(line)
    }
}

/// A fresh random seed (printed by failing tests, so they can be replayed with TORTURE_SEED).
func tortureSeed() -> UInt64 {
    if let fixed = Torture.environment["TORTURE_SEED"].flatMap(UInt64.init) { return fixed }
    var generator = SystemRandomNumberGenerator()
    return UInt64.random(in: 1...UInt64.max, using: &generator)
}
