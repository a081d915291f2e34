/// Secret bytes (a key, a token) kept in guarded memory.
///
/// The memory is locked against swapping, excluded from core dumps, fenced by guard pages, read-only once
/// filled, and zeroed when the last copy of the value is released. The bytes are reachable only inside
/// ``withUnsafeBytes(_:)``; descriptions never show them, and the type is deliberately not `Codable`.
///
/// ```swift
/// let token = SecretBytes(utf8: "eyJhbGciOi...")
/// print(token)                      // SecretBytes(13 bytes)
/// token.withUnsafeBytes { raw in
///     send(raw)                     // use the bytes without copying them out
/// }
/// ```
///
/// Each secret takes a page of its own between guard pages (larger ones several), made and released in system
/// calls, so keep long-lived secrets in one value rather than creating one per operation.
public struct SecretBytes: Sendable {
    let storage: GuardedBuffer
    /// Where the bytes start in `storage` (0 but for secrets allocated together).
    private let offset: Int
    /// The number of secret bytes.
    public let count: Int

    /// Copies `bytes` into guarded memory. The source is not zeroed: prefer producing secrets directly into a
    /// `SecretBytes` where you can.
    public init(_ bytes: some Sequence<UInt8>) {
        var array = Array(bytes)
        self.init(count: array.count) { buffer in
            buffer.copyBytes(from: array)
        }
        array.withUnsafeMutableBytes { Sodium.zero($0) }  // our own temporary copy, at least, does not linger
    }

    /// Copies the UTF-8 bytes of `string` into guarded memory.
    public init(utf8 string: String) {
        var copy = string
        self = copy.withUTF8 { utf8 in
            SecretBytes(count: utf8.count) { $0.copyMemory(from: UnsafeRawBufferPointer(utf8)) }
        }
    }

    /// `count` bytes from the system's cryptographically secure random source.
    ///
    /// ```swift
    /// let key = SecretBytes.random(count: 32)
    /// ```
    public static func random(count: Int) -> SecretBytes {
        SecretBytes(count: count) { Sodium.fillRandom($0) }
    }

    /// Allocates `count` bytes and lets `body` write every one of them.
    package init(count: Int, initializingWith body: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        storage = try GuardedBuffer(count: count, initializingWith: body)
        offset = 0
        self.count = count
    }

    private init(storage: GuardedBuffer, offset: Int, count: Int) {
        self.storage = storage
        self.offset = offset
        self.count = count
    }

    /// Three secrets of `first`, `second` and `third` bytes made together in one guarded region, which `body` fills
    /// (one buffer per secret, in order): one allocation instead of three, for keys an owner derives and keeps
    /// together (a sealer's subkeys). The region is fenced by guard pages at its ends, read-only once filled, and
    /// zeroed when the last of the secrets is released. Three, as a tuple, not a list: a fresh process's first
    /// array of a new element type costs it the runtime's instantiation of that type (PerformanceIssues36-39.md, issue 39).
    package static func allocatedTogether(
        _ first: Int, _ second: Int, _ third: Int,
        initializingWith body: (
            UnsafeMutableRawBufferPointer, UnsafeMutableRawBufferPointer, UnsafeMutableRawBufferPointer
        ) -> Void
    ) -> (SecretBytes, SecretBytes, SecretBytes) {
        precondition(first > 0 && second > 0 && third > 0, "a secret allocated with others has at least one byte")
        let storage = GuardedBuffer(count: first + second + third) { region in
            body(
                UnsafeMutableRawBufferPointer(rebasing: region[0..<first]),
                UnsafeMutableRawBufferPointer(rebasing: region[first..<first + second]),
                UnsafeMutableRawBufferPointer(rebasing: region[first + second..<first + second + third]))
        }
        return (
            SecretBytes(storage: storage, offset: 0, count: first),
            SecretBytes(storage: storage, offset: first, count: second),
            SecretBytes(storage: storage, offset: first + second, count: third)
        )
    }

    /// Calls `body` with the secret bytes. Do not let the pointer escape the closure.
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: storage.pointer + offset, count: count))
    }
}

extension SecretBytes: Equatable {
    /// Compares in constant time for equal lengths.
    public static func == (lhs: SecretBytes, rhs: SecretBytes) -> Bool {
        lhs.withUnsafeBytes { a in rhs.withUnsafeBytes { b in Sodium.constantTimeEqual(a, b) } }
    }
}

extension SecretBytes: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `SecretBytes(N bytes)`: the length only, never the contents.
    public var description: String { "SecretBytes(\(count) bytes)" }
    public var debugDescription: String { description }
    /// No children, so `dump` and debuggers show nothing of the contents.
    public var customMirror: Mirror { Mirror(self, children: [:], displayStyle: .struct) }
}
