import SystemLayer
import Testing

/// The text formats SystemLayer keeps for every module: error descriptions and UTC timestamps.
struct FormattingTests {
    @Test func anErrorDescriptionNamesTypeCodeMessageAndACauseTheMessageDoesNotName() {
        #expect(
            describeError(type: "PrefsError", code: "io", message: "cannot read x.prefs", cause: "errno 5")
                == "PrefsError.io: cannot read x.prefs (errno 5)")
        #expect(
            describeError(type: "VaultError", code: "io", message: "cannot read x.prefs: errno 5", cause: "errno 5")
                == "VaultError.io: cannot read x.prefs: errno 5")
        #expect(
            describeError(type: "VaultError", code: "locked", message: "locked", cause: nil)
                == "VaultError.locked: locked")
    }

    @Test func aUTCTimeIsFormattedWithTwoDigitFieldsAndTheGivenSeparators() throws {
        let time = try #require(Sys.utcTime(secondsSinceEpoch: 1_700_000_000 + 7))
        #expect(time.formatted() == "20231114T221327Z")
        #expect(time.formatted(dateSeparator: "-", timeSeparator: ":") == "2023-11-14T22:13:27Z")
    }
}
