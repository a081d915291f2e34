import Foundation
import Synchronization
import TestSealer
import Testing

@testable import PrefsKV

/// The state the update tests count in, one field per writer (the helper's `prefs-update-state` writes the same
/// shape).
private struct Counters: Codable, Sendable, Equatable {
    var a = 0
    var b = 0
}

extension PrefsKeys {
    /// The key the update tests count in (the helper's `prefs-update-key` counts in the same one).
    fileprivate static let count = PrefsKey<Int>("count", default: 0)
}

/// Runs each body on a thread of its own, all starting together once every thread is running, and waits for
/// them; returns the errors they threw. The wait only guards against a hang (300 s); it is no measure of speed.
private func runTogether(_ bodies: [@Sendable () throws -> Void]) -> [String] {
    let arrived = Atomic<Int>(0)
    let finished = Atomic<Int>(0)
    let errors = Mutex<[String]>([])
    for body in bodies {
        Thread {
            arrived.add(1, ordering: .acquiringAndReleasing)
            while arrived.load(ordering: .acquiring) < bodies.count { sched_yield() }
            do {
                try body()
            } catch {
                errors.withLock { $0.append("\(error)") }
            }
            finished.add(1, ordering: .acquiringAndReleasing)
        }.start()
    }
    let deadline = Date().addingTimeInterval(300)
    while finished.load(ordering: .acquiring) < bodies.count && Date() < deadline { usleep(5_000) }
    if finished.load(ordering: .acquiring) < bodies.count { errors.withLock { $0.append("a thread hung") } }
    return errors.withLock { $0 }
}

/// Updates run their transform on the stored value under the writer lock (issue 35, point 2): two writers, in
/// two processes or on two threads of one handle, each counting 500 in a field or key of their own, end with
/// every one of the 1,000 counted.
@Suite struct AtomicUpdateTests {
    @Test func twoProcessesUpdatingOneStateLoseNoUpdate() throws {
        let dir = try TempDir("update-state-mp")
        let children = try ["a", "b"].enumerated().map { worker, field in
            try Child(["prefs-update-state", dir.path, "ui", "\(worker)", "2", field, "500"])
        }
        for child in children {
            #expect(child.waitForLine(timeout: 300) { $0 == "done" } == "done")
            #expect(child.drain() == 0)
        }
        let counters = PersistedState(name: "counters", defaults: Counters(), store: try openStore(dir))
        #expect(counters.hydration == .stored)
        #expect(counters.value == Counters(a: 500, b: 500))
    }

    /// Plain and sealed (a sealed store commits every write through a transaction plan).
    @Test(arguments: [false, true])
    func twoThreadsUpdatingOneStateOnOneHandleLoseNoUpdate(sealed: Bool) throws {
        let dir = try TempDir("update-state-threads", memory: true)
        let store = try openStore(dir) { $0.sealer = sealed ? TestSealer(key: 7) : nil }
        let counters = PersistedState(name: "counters", defaults: Counters(), store: store)
        let errors = runTogether([
            { for _ in 0..<500 { try counters.update { $0.a += 1 } } },
            { for _ in 0..<500 { try counters.update { $0.b += 1 } } },
        ])
        #expect(errors.isEmpty, "\(errors)")
        #expect(counters.value == Counters(a: 500, b: 500))
        #expect(PersistedState(name: "counters", defaults: Counters(), store: store).value == Counters(a: 500, b: 500))
    }

    @Test func twoThreadsUpdatingAStateWithoutAStoreLoseNoUpdate() {
        let counters = PersistedState(name: "counters", defaults: Counters(), store: nil)
        let errors = runTogether([
            { for _ in 0..<500 { try counters.update { $0.a += 1 } } },
            { for _ in 0..<500 { try counters.update { $0.b += 1 } } },
        ])
        #expect(errors.isEmpty, "\(errors)")
        #expect(counters.value == Counters(a: 500, b: 500))
    }

    /// The transform starts from what is stored, not from this handle's copy, which has not followed another
    /// handle's write (nothing observes it).
    @Test func anUpdateStartsFromAnotherHandlesWriteNotFromThisHandlesCopy() throws {
        let dir = try TempDir("update-state-stale", memory: true)
        let mine = PersistedState(name: "counters", defaults: Counters(), store: try openStore(dir))
        try PersistedState(name: "counters", defaults: Counters(), store: try openStore(dir)).set(Counters(a: 0, b: 7))
        #expect(mine.value == Counters())
        #expect(try mine.update { $0.a += 1 } == Counters(a: 1, b: 7))
        #expect(mine.value == Counters(a: 1, b: 7))
        #expect(PersistedState(name: "counters", defaults: Counters(), store: try openStore(dir)).value.b == 7)
    }

    /// A state stored at an older version is migrated before the transform sees it; the result is written at the
    /// current version.
    @Test func anUpdateOfAnOlderStoredVersionTransformsItsMigration() throws {
        struct V0: Codable, Sendable { var a: Int }
        let dir = try TempDir("update-state-migrate", memory: true)
        let store = try openStore(dir)
        let counters = PersistedState(name: "counters", version: 1, defaults: Counters(), store: store) { old in
            Counters(a: try old.decode(V0.self).a, b: 0)
        }
        try PersistedState(name: "counters", defaults: V0(a: 0), store: try openStore(dir)).set(V0(a: 41))
        #expect(try counters.update { $0.a += 1 } == Counters(a: 42, b: 0))
        let reread = PersistedState(name: "counters", version: 1, defaults: Counters(), store: store)
        #expect(reread.hydration == .stored)
        #expect(reread.value == Counters(a: 42, b: 0))
    }

    /// A transform that throws aborts the update: the error comes back, nothing is written, the state is unchanged.
    @Test func aTransformThatThrowsWritesNothing() throws {
        struct Refused: Error {}
        let dir = try TempDir("update-state-throws", memory: true)
        let store = try openStore(dir)
        let counters = PersistedState(name: "counters", defaults: Counters(), store: store)
        try counters.set(Counters(a: 1, b: 1))
        let before = try readBytes(store.path)
        #expect(throws: Refused.self) {
            try counters.update {
                $0.a = 99
                throw Refused()
            }
        }
        #expect(counters.value == Counters(a: 1, b: 1))
        #expect(try readBytes(store.path) == before)
    }

    // MARK: Typed keys and ObservedPref

    @Test func twoProcessesUpdatingOneKeyLoseNoUpdate() throws {
        let dir = try TempDir("update-key-mp")
        let children = try (0..<2).map { try Child(["prefs-update-key", dir.path, "ui", "\($0)", "2", "500"]) }
        for child in children {
            #expect(child.waitForLine(timeout: 300) { $0 == "done" } == "done")
            #expect(child.drain() == 0)
        }
        let total = try openStore(dir).value(of: .count)
        #expect(total == 1_000)
    }

    @Test func twoThreadsUpdatingOneObservedPrefLoseNoUpdate() throws {
        let dir = try TempDir("update-observed-threads", memory: true)
        let store = try openStore(dir)
        let count = store.observable(PrefsKeys.count)
        let errors = runTogether([
            { for _ in 0..<500 { try count.update { $0 += 1 } } },
            { for _ in 0..<500 { try count.update { $0 += 1 } } },
        ])
        #expect(errors.isEmpty, "\(errors)")
        #expect(count.value == 1_000)
        let stored = try openStore(dir).value(of: .count)
        #expect(stored == 1_000)
    }

    /// The transform starts from what another handle stored, and the result is returned.
    @Test func aKeyUpdateStartsFromAnotherHandlesWriteAndReturnsTheResult() throws {
        let dir = try TempDir("update-key-stale", memory: true)
        let store = try openStore(dir)
        #expect(try store.update(.count) { $0 += 1 } == 1)
        try openStore(dir).set(41, for: .count)
        #expect(try store.update(.count) { $0 += 1 } == 42)
        #expect(store[.count] == 42)
    }

    /// A transform that throws, or a stored value the key cannot read, aborts the update: nothing is written, and
    /// in the second case the transform never runs.
    @Test func aKeyUpdateThatThrowsOrCannotReadTheValueWritesNothing() throws {
        struct Refused: Error {}
        let dir = try TempDir("update-key-throws", memory: true)
        let store = try openStore(dir)
        try store.set(5, for: .count)
        let before = try readBytes(store.path)
        #expect(throws: Refused.self) {
            try store.update(.count) {
                $0 = 99
                throw Refused()
            }
        }
        #expect(try readBytes(store.path) == before)

        try store.set("five", forKey: "count")
        let stringStored = try readBytes(store.path)
        let ran = Mutex(false)
        expectError(.typeMismatch) {
            try store.update(.count) { _ in ran.withLock { $0 = true } }
        }
        #expect(!ran.withLock { $0 })
        #expect(try readBytes(store.path) == stringStored)
    }
}
