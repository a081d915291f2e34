import ArgumentParser
import FoundationEssentials
import PrefsKV

extension Prefs {
    /// `vaultctl prefs import STORE FILE [--from export|json|zustand] [--name NAME] [--replace] [--dry-run]`
    struct ImportCommand: StoreCommand {
        static let configuration = CommandConfiguration(
            commandName: "import",
            abstract: "Bring entries in from a `prefs export` document, a JSON settings file or a Zustand payload.",
            discussion: """
                --from export (the default) accepts exactly what `prefs export` prints (from any store id); the \
                store then holds exactly the document's entries, in one transaction, and is created if it does \
                not exist. Entries that have already expired are skipped. A document that is not an export exits \
                64 and changes (or creates) nothing.

                --from json takes a flat JSON object (electron-store's config.json, a settings file): true/false \
                become bool keys, integers int, other numbers double, strings string, arrays of strings strings, \
                anything else json (its JSON text: read it with the library's decode(_:forKey:)); null is skipped. --from zustand takes a \
                Zustand persist payload {"state": ..., "version": n} and stores it as the PersistedState --name \
                NAME at version n, so that the app's migration runs on it at its first hydration. Both write in \
                one transaction, leave a key that already holds the value (unchanged) and keep one the store holds \
                another value for (kept; --replace overwrites), so running them again changes nothing and says \
                so. --dry-run says what would change and writes nothing. FILE is only read; - is standard input.

                JSON (--from export): {"store": "ui", "path": "...", "imported": 3, "created": false}. \
                (--from json or zustand): {"store": "ui", "path": "...", "from": "json", "created": false, \
                "dryRun": false, "imported": ["theme"], "unchanged": [], "kept": [], "skipped": [], \
                "types": {"theme": "string"}}.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: StoreSelection

        @Argument(help: "The document, or - for standard input.")
        var file: String

        enum Source: String, ExpressibleByArgument, CaseIterable {
            case export, json, zustand
        }

        @Option(help: ArgumentHelp("What FILE is: export, json or zustand.", valueName: "kind"))
        var from: Source = .export

        @Option(help: ArgumentHelp("With --from zustand: the PersistedState's name.", valueName: "name"))
        var name: String?

        @Flag(help: "With --from json or zustand: overwrite keys the store holds another value for.")
        var replace = false

        @Flag(name: .customLong("dry-run"), help: "With --from json or zustand: say what would change, write nothing.")
        var dryRun = false

        func checkArguments() throws {
            if from == .zustand, name == nil {
                throw CLIFailure.usage("--from zustand needs --name NAME: the PersistedState the payload becomes")
            }
            if from != .zustand, name != nil { throw CLIFailure.usage("--name goes with --from zustand only") }
            if from == .export, replace || dryRun {
                throw CLIFailure.usage(
                    "--replace and --dry-run go with --from json or zustand (an export replaces the store)")
            }
        }

        func answer(store target: StoreTarget, console: Console) throws -> Answer {
            let document = try readInput(file)
            let source = file == "-" ? "standard input" : file
            guard from == .export else { return try importSettings(document, source: source, target: target) }
            do {
                try PrefsStore.validateExport(document)
            } catch let error as PrefsError {
                throw CLIFailure(error, message: "cannot import \(source) into store \"\(store)\": \(error.message)")
            }
            let created = !target.exists
            let opened = try target.open(creating: true)
            try opened.importJSON(document)
            let count = try opened.count
            return Answer(
                json: Report(store: store, path: target.dataPath, imported: count, created: created),
                human: "imported \(plural(count, "entry", "entries")) into store \(store) (\(target.dataPath))")
        }

        /// `--from json` and `--from zustand`: the document is checked before a store is opened (or created).
        private func importSettings(_ document: Data, source: String, target: StoreTarget) throws -> Answer {
            let created = !target.exists
            let report: PrefsImportReport
            do {
                // Checked first as a dry run (against an empty temporary store when there is none yet), so that a
                // bad document creates no store and a dry run creates nothing.
                let check = try importing(
                    document, into: created ? try PrefsStore.temporary() : try target.open(), dryRun: true)
                report = dryRun ? check : try importing(document, into: try target.open(creating: true), dryRun: false)
            } catch let error as PrefsError where [.invalidInput, .invalidKey, .valueTooLarge].contains(error.code) {
                throw CLIFailure(error, message: "cannot import \(source) into store \"\(store)\": \(error.message)")
            }
            let verb = dryRun ? "would import" : "imported"
            var human = "\(verb) \(plural(report.imported.count, "key")) into store \(store) (\(target.dataPath))"
            if !report.unchanged.isEmpty { human += "; \(report.unchanged.count) unchanged" }
            if !report.kept.isEmpty {
                human +=
                    "; kept \(report.kept.count) the store holds another value for (--replace overwrites): "
                    + report.kept.joined(separator: ", ")
            }
            if !report.skipped.isEmpty {
                human += "; skipped \(report.skipped.count) null: " + report.skipped.joined(separator: ", ")
            }
            return Answer(
                json: SettingsReport(
                    store: store, path: target.dataPath, from: from.rawValue, created: created && !dryRun,
                    dryRun: dryRun, imported: report.imported, unchanged: report.unchanged, kept: report.kept,
                    skipped: report.skipped, types: report.types),
                human: human)
        }

        private func importing(_ document: Data, into store: PrefsStore, dryRun: Bool) throws -> PrefsImportReport {
            switch from {
            case .json: return try store.importJSONObject(document, replacing: replace, dryRun: dryRun)
            case .zustand:
                return try store.importPersistedState(document, as: name ?? "", replacing: replace, dryRun: dryRun)
            case .export: preconditionFailure("an export is imported by answer(store:console:)")
            }
        }

        /// The `--json` answer of `--from export`.
        struct Report: Encodable {
            var store: String
            var path: String
            var imported: Int
            var created: Bool
        }

        /// The `--json` answer of `--from json` and `--from zustand`.
        struct SettingsReport: Encodable {
            var store: String
            var path: String
            var from: String
            var created: Bool
            var dryRun: Bool
            var imported: [String]
            var unchanged: [String]
            var kept: [String]
            var skipped: [String]
            var types: [String: String]
        }
    }
}
