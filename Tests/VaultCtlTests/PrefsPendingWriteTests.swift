// The bytes a power cut can leave after a `.synchronous` write's one flush (its records and pending word on the disk,
// its log end not yet), read through vaultctl: `prefs get` answers the write that returned and `prefs verify` calls
// the store clean; with one of the write's sectors not on the disk, `prefs get` answers the value before it, also
// clean (FileProtocols.md, "Durability"). Real bytes in a real file, written by the library.
import Foundation
import PrefsKV
import Testing

@Suite struct PrefsPendingWriteTests {
    /// Writes theme = light then theme = dark into a synchronous store, then puts back the log end (8 bytes at
    /// offset 256, FileFormat.md) the file had before the second write; `torn`: also flips a byte of that write's
    /// last record.
    static func cut(_ sandbox: PrefsSandbox, torn: Bool) throws {
        let path = sandbox.path("ui.prefs")
        var before = Data()
        do {
            var configuration = PrefsStore.Configuration()
            configuration.durability = .synchronous
            let store = try PrefsStore(id: "ui", directory: sandbox.directory, configuration: configuration)
            try store.set("light", forKey: "theme")
            before = try Data(contentsOf: URL(fileURLWithPath: path))
            try store.set("dark", forKey: "theme")
        }
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let end = Int(bytes[256..<264].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) } & 0xFFFF_FFFF_FFFF)
        bytes.replaceSubrange(256..<264, with: before[256..<264])
        if torn { bytes[end - 6] ^= 0x40 }
        try bytes.write(to: URL(fileURLWithPath: path))
    }

    @Test(arguments: [false, true])
    func aSynchronousWriteWhoseLogEndIsNotOnTheDiskReadsAsWhatReachedIt(torn: Bool) throws {
        let sandbox = try PrefsSandbox()
        try Self.cut(sandbox, torn: torn)
        let cut = try Data(contentsOf: URL(fileURLWithPath: sandbox.path("ui.prefs")))
        let verify = try sandbox.run(["prefs", "verify", "ui"])
        #expect(verify.status == 0, "\(verify)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: sandbox.path("ui.prefs"))) == cut, "verify changed nothing")
        let get = try sandbox.run(["prefs", "get", "ui", "theme"])
        #expect(get.status == 0 && get.standardOutput == (torn ? "light\n" : "dark\n"), "\(get)")
        try sandbox.succeed(["prefs", "set", "ui", "sidebar", "left"])
        #expect(try sandbox.run(["prefs", "get", "ui", "theme"]).standardOutput == (torn ? "light\n" : "dark\n"))
        #expect(try sandbox.run(["prefs", "get", "ui", "sidebar"]).standardOutput == "left\n")
        #expect(try sandbox.run(["prefs", "verify", "ui"]).status == 0)
    }
}
