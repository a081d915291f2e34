// The types an app wrote its MMKV values with, which MMKV does not record, and how each is decoded.
import PrefsKV

/// How an MMKV value was written, which MMKV does not record: the caller says it per key or pattern.
///
/// ```swift
/// let types: [String: MMKVType] = ["sidebar.width": .int32, "theme": .string, "recent.*": .strings]
/// ```
public struct MMKVType: Sendable, Hashable, CustomStringConvertible {
    enum Kind: String, CaseIterable {
        case bool, int32, int64, uint32, uint64, float, double, string, bytes, strings
    }
    let kind: Kind

    /// `set(bool)`: stored as `bool`.
    public static let bool = MMKVType(kind: .bool)
    /// `set(int32_t)`: stored as `int`.
    public static let int32 = MMKVType(kind: .int32)
    /// `set(int64_t)`: stored as `int`.
    public static let int64 = MMKVType(kind: .int64)
    /// `set(uint32_t)`: stored as `int`.
    public static let uint32 = MMKVType(kind: .uint32)
    /// `set(uint64_t)`: stored as `int` (a value above `Int64.max` does not fit and is refused).
    public static let uint64 = MMKVType(kind: .uint64)
    /// `set(float)`: stored as `double`.
    public static let float = MMKVType(kind: .float)
    /// `set(double)`: stored as `double`.
    public static let double = MMKVType(kind: .double)
    /// `set(std::string)` (`encode(String)` on Android, whose modified UTF-8 is read too): stored as `string`.
    public static let string = MMKVType(kind: .string)
    /// `set(MMBuffer)` (`encode(byte[])`, `setData`): stored as `bytes`.
    public static let bytes = MMKVType(kind: .bytes)
    /// `set(std::vector<std::string>)` (`encode(Set<String>)`): stored as `strings`.
    public static let strings = MMKVType(kind: .strings)

    /// The type a name spells (`bool`, `int32`, `int64`, `uint32`, `uint64`, `float`, `double`, `string`, `bytes`,
    /// `strings`), nil for any other.
    ///
    /// ```swift
    /// MMKVType(name: "int32")  // .int32
    /// ```
    public init?(name: String) {
        guard let kind = Kind(rawValue: name) else { return nil }
        self.kind = kind
    }

    init(kind: Kind) { self.kind = kind }

    /// Every name ``init(name:)`` accepts.
    public static var names: [String] { Kind.allCases.map(\.rawValue) }

    public var description: String { kind.rawValue }

    /// The value MMKV encoded as `bytes` (its expiry suffix removed), nil when the bytes are not one of this type.
    func decode(_ bytes: [UInt8]) -> PrefsValue? {
        let reader = VarintReader(bytes: bytes)
        switch kind {
        case .bool:
            guard bytes.count == 1, bytes[0] <= 1 else { return nil }
            return .bool(bytes[0] == 1)
        case .int32:
            // A negative int32 is written sign-extended to 64 bits, as protobuf does.
            guard let raw = reader.onlyVarint, Int64(truncatingIfNeeded: raw) == Int64(Int32(truncatingIfNeeded: raw))
            else { return nil }
            return .int(Int64(Int32(truncatingIfNeeded: raw)))
        case .int64:
            return reader.onlyVarint.map { .int(Int64(bitPattern: $0)) }
        case .uint32:
            guard let raw = reader.onlyVarint, raw <= UInt64(UInt32.max) else { return nil }
            return .int(Int64(raw))
        case .uint64:
            guard let raw = reader.onlyVarint, raw <= UInt64(Int64.max) else { return nil }
            return .int(Int64(raw))
        case .float:
            guard bytes.count == 4 else { return nil }
            return .double(Double(Float(bitPattern: bytes.loadUInt32(at: 0))))
        case .double:
            guard bytes.count == 8 else { return nil }
            return .double(Double(bitPattern: bytes.loadUInt64(at: 0)))
        case .string:
            guard let text = reader.onlyLengthPrefixed.flatMap(ModifiedUTF8.decode)
            else { return nil }
            return .string(text)
        case .bytes:
            return reader.onlyLengthPrefixed.map { .bytes($0) }
        case .strings:
            guard let run = reader.onlyLengthPrefixed else { return nil }
            var items = VarintReader(bytes: run)
            var strings: [String] = []
            while !items.atEnd {
                guard let item = try? items.lengthPrefixed(), let text = ModifiedUTF8.decode(item)
                else { return nil }
                strings.append(text)
            }
            return .strings(strings)
        }
    }
}
