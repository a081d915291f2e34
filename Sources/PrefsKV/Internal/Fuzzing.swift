// Entry points for the libFuzzer targets under Fuzz/ (`make fuzz`): the record decoder without a file.

/// What the fuzz targets reach below the public API.
package enum PrefsFuzzing {
    /// Scans `bytes` as a log (records from offset 0, as if the header page preceded them) the way an open
    /// does, applying committed records to an index; returns the records kept and the damaged ranges found.
    package static func scanLog(_ bytes: [UInt8], wholeFile: Bool) -> (kept: Int, damaged: Int, keys: Int) {
        let length = bytes.count & ~7
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(length, 8), alignment: 8)
        defer { buffer.deallocate() }
        bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
        let view = UnsafeRawBufferPointer(rebasing: buffer[0..<length])
        var index = KeyIndex()
        var liveBytes = 0
        let result = LogScanner.scan(
            view, from: 0, to: length, freeSpaceEndsLog: wholeFile, plainKeys: true, seed: .unseeded
        ) { record, _ in
            precondition(record.offset >= 0 && record.offset + record.length <= length, "a record outside the log")
            StoreLog.applyToIndex(record, bytes: view, sealed: false, index: &index, liveBytes: &liveBytes)
        }
        precondition(result.end <= length && liveBytes >= 0, "the scan left the log")
        return (result.recordsKept, result.damage.count, index.count)
    }
}
