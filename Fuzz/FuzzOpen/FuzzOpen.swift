// libFuzzer target: opening arbitrary bytes as a PrefsKV store file, plain or sealed with the tests' sealer.
// Checks, beyond "no crash": an open that fails leaves the file byte-identical; an open that succeeds gives a
// store that verifies clean, whose every value reads, and that reopens without another recovery and with the
// same contents. Build and run with `make fuzz` (AddressSanitizer).
import PrefsKV
import TestKit
import TestSealer

let directory = makeScratchDirectory(prefix: "/dev/shm/prefskv-fuzz-")

func contents(_ store: PrefsStore) throws -> [String: PrefsValue] {
    var out: [String: PrefsValue] = [:]
    for key in try store.allKeys { out[key] = try store.value(forKey: key) }
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOpen(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    removeFiles(in: directory)
    let path = directory + "/ui.prefs"
    createFile(at: path, bytes)
    var configuration = PrefsStore.Configuration()
    configuration.logger.logLevel = .critical
    // A sealed header (flags bit 0) is opened with the seed corpus's sealer key.
    if size > 12 && bytes[12] & 1 != 0 { configuration.sealer = TestSealer(key: 5) }
    let store: PrefsStore
    do {
        store = try PrefsStore(id: "ui", directory: directory, configuration: configuration)
    } catch {
        precondition(readFile(path) == bytes, "a failed open changed the file")
        return 0
    }
    do {
        let first = try contents(store)
        let clean = try store.verify().isClean
        precondition(clean, "a recovered store does not verify")
        let again = try PrefsStore(id: "ui", directory: directory, configuration: configuration)
        precondition(again.lastRecovery == nil, "a second open needed another recovery")
        let second = try contents(again)
        precondition(second == first, "a reopen reads other values")
    } catch let error as PrefsError where error.code == .tampered || error.code == .corrupted {
        // A sealed value whose CRC verifies but which does not open, or a value with an invalid encoding:
        // reported, never misread.
    } catch {
        preconditionFailure("unexpected error after a successful open: \(error)")
    }
    return 0
}
