// prefs_guard (CPrefsKV): what the SIGBUS guard does with a SIGBUS that is not its own, and with the disposition it
// found when it was installed. Each scenario runs in a fresh helper process (the guard is installed once per
// process, and this one's may be already), in a child of its own (CForkProbe's fork_probe_guard), whose guard is
// installed over the disposition the child set.
import Testing
import TestSupport

@Suite struct SignalGuardTests {
    static func probe(_ scenario: Int) throws -> String {
        let result = try ChildProcess.run(KeyringSession.helper, ["guard-probe", String(scenario)])
        return result.lines.first ?? "no answer: \(result)"
    }

    /// SIGBUS ignored before the guard: a `kill -BUS` stays ignored (before: the guard restored the default and
    /// raised it again, so the process ended). A real fault outside PrefsKV's mappings still ends the process, as
    /// the kernel ends one whose SIGBUS is ignored.
    @Test func aSentSigbusStaysIgnoredWhenItWasIgnoredBeforeTheGuard() throws {
        #expect(try Self.probe(1) == "\(2 * 1000 + 128 + 7)", "stage 2, then SIGBUS (7) from the unguarded fault")
    }

    /// A one-shot (SA_RESETHAND) handler installed before the guard runs once for the first foreign SIGBUS and is
    /// used up, as it would have been; the guard stays installed and answers the next fault in a guarded mapping
    /// (before: the first foreign SIGBUS reset the whole process to the default action, and that fault ended it).
    /// The next foreign SIGBUS takes the default action.
    @Test func aOneShotPreviousHandlerRunsOnceAndTheGuardStays() throws {
        #expect(try Self.probe(2) == "\(2 * 1000 + 128 + 7)", "stage 2, then SIGBUS (7) from the second kill")
    }
}
