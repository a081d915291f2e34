// Sys.makePrivateDirectory while something removes what it makes.
import Glibc
import Synchronization
import SystemLayer
import Testing

@Suite struct PrivateDirectoryTests {
    /// Removes a directory as fast as it can on a thread of its own until stopped.
    final class Remover: Sendable {
        let path: String
        let stop = Atomic<Bool>(false)
        init(path: String) { self.path = path }
    }

    /// A directory removed between its `mkdir` and its `chmod` is made again, not a failure (a vault's first write
    /// exited 74 when a failed one's clean-up removed the directory it had just made: issue 35's flake loop). A
    /// thread removes the directory as fast as it can while this one makes it 200,000 times.
    @Test func aDirectoryRemovedAsItIsMadeIsMadeAgain() throws {
        var template = Array(((Sys.environment("TMPDIR") ?? "/tmp") + "/private-directory-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }.map { String(cString: $0) }
        let root = try #require(made)
        let path = root + "/vault"
        defer {
            Glibc.rmdir(path)
            Glibc.rmdir(root)
        }
        let remover = Remover(path: path)
        let context = Unmanaged.passRetained(remover).toOpaque()
        var thread = pthread_t()
        let started = pthread_create(
            &thread, nil,
            { context in
                let remover = Unmanaged<Remover>.fromOpaque(context!).takeRetainedValue()
                while !remover.stop.load(ordering: .relaxed) { Glibc.rmdir(remover.path) }
                return nil
            }, context)
        guard started == 0 else {
            Unmanaged<Remover>.fromOpaque(context).release()
            Issue.record("pthread_create failed: \(started)")
            return
        }
        var failures: [String] = []
        for _ in 0..<200_000 {
            if case .failure(let error) = Sys.makePrivateDirectory(path) { failures.append(error.text) }
        }
        remover.stop.store(true, ordering: .relaxed)
        pthread_join(thread, nil)
        #expect(failures.isEmpty, "\(failures.count) of 200,000 makes failed, the first with \(failures.first ?? "")")
    }
}
