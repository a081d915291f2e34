import SystemLayer
import Testing

/// The one naming rule for store ids, vault service names and vault key names.
struct NamesTests {
    @Test(arguments: ["a", "ui", "ui.settings", "A-Z_0.9", "a.", ".a", String(repeating: "n", count: 128)])
    func namesOfTheAllowedBytesAreValidInBothRoles(_ name: String) {
        #expect(Names.isValid(name, as: .fileName))
        #expect(Names.isValid(name, as: .itemName))
    }

    @Test(arguments: ["", ".", "..", "a/b", "../x", "sp ace", "ümlaut", String(repeating: "n", count: 129)])
    func emptyDotsSlashesOtherBytesAndLongNamesAreInvalidInBothRoles(_ name: String) {
        #expect(!Names.isValid(name, as: .fileName))
        #expect(!Names.isValid(name, as: .itemName))
    }

    @Test(arguments: ["a..b", "a..", "..a", "x...y"])
    func aDoubleDotInsideIsRefusedInAFileNameOnly(_ name: String) {
        #expect(!Names.isValid(name, as: .fileName))
        #expect(Names.isValid(name, as: .itemName))
    }
}
