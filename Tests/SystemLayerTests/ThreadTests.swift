import Synchronization
import Testing

import SystemLayer

@Suite struct ThreadTests {
    /// `join` returns only after the body has run to its end: the body waits until the caller has started joining
    /// (told by an event, not a delay), so a `join` that did not wait would see the flag still false.
    @Test func joinWaitsForTheBodyToReturn() throws {
        let stage = Mutex(0)
        let thread = try #require(
            Sys.startThread {
                while stage.withLock({ $0 }) == 0 { Sys.yieldThread() }
                stage.withLock { $0 = 2 }
            })
        stage.withLock { $0 = 1 }
        Sys.join(thread)
        #expect(stage.withLock { $0 } == 2)
    }

    /// A detached thread runs its body (and is never joined).
    @Test func aDetachedThreadRunsItsBody() {
        let ran = Mutex(false)
        #expect(Sys.detachThread { ran.withLock { $0 = true } })
        while !ran.withLock({ $0 }) { Sys.yieldThread() }
    }
}
