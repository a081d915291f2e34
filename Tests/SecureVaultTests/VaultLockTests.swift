import Dispatch
import Foundation
import Testing

@testable import SecureVault

/// The vault lock's record of which thread of this process holds which lock file (`Vault.lockHolders`), through
/// which a thread that holds a vault's lock takes it again without a second `flock`.
@Suite struct VaultLockTests {
    /// Two threads lock two vaults, and release them in the order they took them: the first release copies the
    /// second thread's record (it was made after), and the second release must still find it. A record left behind
    /// would make a later lock of that vault by a thread with the same id skip the `flock`, and so let another
    /// process in during a creation, rotation or wipe.
    @Test func locksReleasedInTheOrderTheyWereTakenLeaveNoRecord() throws {
        let dir = try VaultDirectory()
        let first = try dir.vault("first")
        let second = try dir.vault("second")
        let firstHolds = DispatchSemaphore(value: 0)
        let secondHolds = DispatchSemaphore(value: 0)
        let firstReleased = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        done.enter()
        Thread {
            _ = try? first.withVaultLock { () throws(VaultError) in
                firstHolds.signal()
                secondHolds.wait()
            }
            firstReleased.signal()
            done.leave()
        }.start()
        done.enter()
        Thread {
            firstHolds.wait()
            _ = try? second.withVaultLock { () throws(VaultError) in
                secondHolds.signal()
                firstReleased.wait()
            }
            done.leave()
        }.start()
        done.wait()
        var recorded: [String] = []
        var node = Vault.lockHolders.withLock { $0 }
        while let holder = node {
            recorded.append(holder.path)
            node = holder.next
        }
        #expect(!recorded.contains(first.lockPath) && !recorded.contains(second.lockPath), "\(recorded)")
    }
}
