// libFuzzer target: the PrefsKV log scanner (record decoding, transactions, salvage) on arbitrary bytes.
// Build and run with `make fuzz` (AddressSanitizer); a normal `swift build` builds it without a fuzzer.
import PrefsKV

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRecordDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let normal = PrefsFuzzing.scanLog(bytes, wholeFile: false)
    let salvage = PrefsFuzzing.scanLog(bytes, wholeFile: true)
    // Deterministic, and bounded by what the bytes can hold.
    precondition(normal == PrefsFuzzing.scanLog(bytes, wholeFile: false))
    precondition(normal.kept <= size / 40 && salvage.kept <= size / 40)
    return 0
}
