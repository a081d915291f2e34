import FoundationEssentials

/// A report as the JSON document vaultctl prints: pretty, keys sorted (so output is stable for scripts), "/"
/// left unescaped, non-finite doubles as the strings "inf", "-inf" and "nan"; no trailing newline.
func jsonText(_ report: some Encodable) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    // Non-finite doubles cannot be JSON numbers: print them as strings rather than fail.
    encoder.nonConformingFloatEncodingStrategy = .convertToString(
        positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
    guard let data = try? encoder.encode(report) else { return "null" }
    return String(decoding: data, as: UTF8.self)
}

/// An optional member that JSON shows as `null` when absent, where the contract names the key either way.
///
/// Synthesized `Encodable` leaves a nil optional out; a report's plain optionals (`var value: String?`) are
/// members that only some answers have, and `@Nullable` ones are always there:
///
///     struct Entry: Encodable {
///         var key: String
///         @Nullable var expiresAt: Int64?   // {"expiresAt": null, "key": "theme"}
///     }
@propertyWrapper
struct Nullable<Value: Encodable>: Encodable {
    var wrappedValue: Value?

    init(wrappedValue: Value?) {
        self.wrappedValue = wrappedValue
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let wrappedValue {
            try container.encode(wrappedValue)
        } else {
            try container.encodeNil()
        }
    }
}
