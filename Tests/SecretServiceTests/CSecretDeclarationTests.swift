import Foundation
import Testing
import TestSupport

/// Sources/CSecret declares libsecret's, GIO's and GLib's functions, types and constants itself (the package loads
/// libsecret at first use and links none of them, CSecret.h). A wrong declaration would call a function with the
/// wrong arguments or read a structure at the wrong offset, so each is compiled here against the libraries' own
/// headers (the development packages `make test` installs): every signature must be the header's, and every
/// constant, size and member offset the package relies on must have the header's value.
@Suite struct CSecretDeclarationTests {
    static let include = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Sources/CSecret/include").path

    /// The constants, sizes and member offsets compared: each printed by a program built with the libraries'
    /// headers and by one built with CSecret.h alone.
    static let facts = [
        "G_SOURCE_REMOVE", "G_IO_ERROR_CLOSED", "G_IO_ERROR_CANCELLED", "G_IO_ERROR_TIMED_OUT",
        "G_DBUS_ERROR_SERVICE_UNKNOWN", "G_DBUS_ERROR_NAME_HAS_NO_OWNER", "G_DBUS_ERROR_NO_REPLY",
        "G_DBUS_ERROR_NO_SERVER", "G_DBUS_ERROR_TIMEOUT", "G_DBUS_ERROR_DISCONNECTED", "G_DBUS_ERROR_FILE_NOT_FOUND",
        "G_DBUS_ERROR_UNKNOWN_METHOD", "G_DBUS_ERROR_TIMED_OUT", "G_DBUS_ERROR_UNKNOWN_OBJECT",
        "G_DBUS_ERROR_UNKNOWN_INTERFACE", "G_DBUS_CALL_FLAGS_NONE", "G_DBUS_CALL_FLAGS_NO_AUTO_START",
        "G_DBUS_SIGNAL_FLAGS_NONE", "G_DBUS_CONNECTION_FLAGS_NONE", "G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT",
        "G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION", "G_DBUS_CONNECTION_FLAGS_CROSS_NAMESPACE",
        "G_SOCKET_FAMILY_UNIX", "G_SOCKET_TYPE_STREAM", "G_SOCKET_PROTOCOL_DEFAULT", "G_UNIX_SOCKET_ADDRESS_PATH",
        "G_UNIX_SOCKET_ADDRESS_ABSTRACT", "SECRET_ERROR_IS_LOCKED", "SECRET_SERVICE_NONE", "SECRET_SEARCH_ALL",
        "SECRET_COLLECTION_NONE", "SECRET_SCHEMA_NONE", "SECRET_SCHEMA_DONT_MATCH_NAME",
        "SECRET_SCHEMA_ATTRIBUTE_STRING", "SECRET_SCHEMA_ATTRIBUTE_INTEGER", "SECRET_SCHEMA_ATTRIBUTE_BOOLEAN",
        "sizeof(gboolean)", "sizeof(gsize)", "sizeof(GType)", "sizeof(GQuark)", "sizeof(gint64)",
        "sizeof(GDBusCallFlags)", "sizeof(GDBusConnectionFlags)", "sizeof(GSocketFamily)", "sizeof(SecretSearchFlags)",
        "sizeof(GError)", "offsetof(GError, domain)", "offsetof(GError, code)", "offsetof(GError, message)",
        "sizeof(GList)", "offsetof(GList, data)", "offsetof(GList, next)", "offsetof(GList, prev)",
        "sizeof(GValue)", "_Alignof(GValue)", "offsetof(GValue, data)",
        "sizeof(SecretSchemaAttribute)", "offsetof(SecretSchemaAttribute, type)",
        "sizeof(SecretSchema)", "offsetof(SecretSchema, flags)", "offsetof(SecretSchema, attributes)",
        "offsetof(SecretSchema, reserved)", "offsetof(SecretSchema, reserved7)",
        // Each enumeration's signedness (its underlying type): -1 converted to it is negative only when signed.
        "(GIOErrorEnum)-1 < 0", "(GDBusError)-1 < 0", "(GDBusCallFlags)-1 < 0", "(GDBusSignalFlags)-1 < 0",
        "(GDBusConnectionFlags)-1 < 0", "(GSocketFamily)-1 < 0", "(GSocketType)-1 < 0", "(GSocketProtocol)-1 < 0",
        "(GUnixSocketAddressType)-1 < 0", "(SecretError)-1 < 0", "(SecretServiceFlags)-1 < 0",
        "(SecretSearchFlags)-1 < 0", "(SecretCollectionFlags)-1 < 0", "(SecretSchemaFlags)-1 < 0",
        "(SecretSchemaAttributeType)-1 < 0",
        // The callbacks' and basic types' sizes (their parameters are checked by the signatures' test).
        "sizeof(GCallback)", "sizeof(GSourceFunc)", "sizeof(GDBusSignalCallback)", "sizeof(gulong)", "sizeof(guint32)",
    ]

    static let libraryHeaders = """
        #define SECRET_API_SUBJECT_TO_CHANGE 1
        #include <libsecret/secret.h>
        #include <gio/gunixfdlist.h>
        #include <gio/gunixsocketaddress.h>
        """

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// A fresh directory for the programs, in the system's temporary directory (the caller removes it).
    static func temporaryDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "csecret-declarations-" + KeyringSession.randomID()
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// The Swift toolchain's clang (gcc is not used: it counts a function's `__attribute__((const))`, GLib's
    /// `G_GNUC_CONST`, as part of its type, so five correct declarations would differ from the header's).
    static func compiler() throws -> String {
        let found = try ChildProcess.bash("command -v clang")
        guard found.status == 0, let path = found.lines.first else {
            throw Failure(description: "no clang on PATH (the Swift toolchain ships one beside swift)")
        }
        return path
    }

    /// Compiles `source` (with `flags`) into an executable in `directory` and runs it; its output.
    static func build(
        _ source: String, named name: String, flags: [String], in directory: String
    ) throws -> ChildResult {
        try Data(source.utf8).write(to: URL(fileURLWithPath: "\(directory)/\(name).c"))
        let built = try ChildProcess.run(
            try compiler(), ["-std=gnu11", "-Werror", "-o", "\(directory)/\(name)", "\(directory)/\(name).c"] + flags)
        #expect(built.status == 0, "\(name).c did not compile: \(built.standardError)")
        return built.status == 0 ? try ChildProcess.run("\(directory)/\(name)") : built
    }

    static func headerFlags() throws -> [String] {
        let flags = try ChildProcess.run("/usr/bin/env", ["pkg-config", "--cflags", "libsecret-1", "gio-unix-2.0"])
        guard flags.status == 0 else {
            throw Failure(
                description: "pkg-config found no libsecret-1 headers (scripts/bootstrap.sh installs libsecret-1-dev)")
        }
        return flags.standardOutput.split(whereSeparator: \.isWhitespace).map(String.init)
    }

    /// Every function of csecret_functions.h has its header's type: `_Static_assert` on each, compiled with the
    /// libraries' headers (a parameter or return type that differs stops the compile, naming the function).
    @Test func everyFunctionHasItsHeadersSignature() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let source = """
            \(Self.libraryHeaders)
            #include "csecret_functions.h"
            #define CHECK(ret, name, params, args) \\
                _Static_assert(__builtin_types_compatible_p(__typeof__(&name), ret (*) params), #name " differs");
            #define CHECK_VOID(name, params, args) \\
                _Static_assert(__builtin_types_compatible_p(__typeof__(&name), void (*) params), #name " differs");
            CSECRET_FUNCTIONS(CHECK, CHECK_VOID)
            static const char *names[] = {
            #define NAME(ret, name, params, args) #name,
            #define NAME_VOID(name, params, args) #name,
                CSECRET_FUNCTIONS(NAME, NAME_VOID)
            };
            #include <stdio.h>
            int main(void) { printf("%zu\\n", sizeof names / sizeof names[0]); return 0; }
            """
        let run = try Self.build(
            source, named: "signatures", flags: ["-I", Self.include] + Self.headerFlags(), in: directory)
        #expect(run.status == 0, "\(run)")
        // Every function the package calls is in the list (SecureVault would not compile otherwise); the count
        // says the list was expanded, not empty.
        #expect(Int(run.lines.first ?? "") ?? 0 >= 100, "\(run)")
    }

    /// Every constant, size and offset the package relies on is the headers' (the same program built twice: once
    /// with the libraries' headers, once with CSecret.h alone).
    @Test func everyConstantAndLayoutIsTheHeaders() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let printing = Self.facts.map { #"    printf("%s = %ld\n", "\#($0)", (long)(\#($0)));"# }
            .joined(separator: "\n")
        let body = "#include <stddef.h>\n#include <stdio.h>\nint main(void) {\n\(printing)\n    return 0;\n}\n"
        let real = try Self.build(
            Self.libraryHeaders + "\n" + body, named: "real", flags: Self.headerFlags(), in: directory)
        let ours = try Self.build(
            "#include \"CSecret.h\"\n" + body, named: "ours", flags: ["-I", Self.include], in: directory)
        #expect(real.status == 0 && ours.status == 0, "\(real) \(ours)")
        #expect(real.lines.count == Self.facts.count && ours.lines.count == Self.facts.count, "\(real) \(ours)")
        for (theirs, mine) in zip(real.lines, ours.lines) {
            #expect(theirs == mine, "the libraries' headers: \(theirs); CSecret.h: \(mine)")
        }
    }
}
