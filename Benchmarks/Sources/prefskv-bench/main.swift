// PrefsKV and SecureVault against SQLite, LMDB and libsecret, side by side, in one run.
//
//   prefskv-bench [--quick] [--json PATH] [--markdown PATH]   run everything; the report goes to stdout
//   prefskv-bench worker <workload> <engine> <directory> <count> [argument]   (internal: one measurement)
//
// BENCH_QUICK=1 is the same as --quick. BENCH_TMPDIR picks where the stores are written (default: TMPDIR or
// /tmp; put it on the disk you care about: tmpfs makes every sync free).
import BenchmarkKit
import FoundationEssentials
import Glibc

var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "worker" {
    exit(Worker.run(Array(arguments.dropFirst())))
}
var quick = environment("BENCH_QUICK").map { $0 != "" && $0 != "0" } ?? false
var jsonPath: String?
var markdownPath: String?
while let argument = arguments.first {
    arguments.removeFirst()
    switch argument {
    case "--quick": quick = true
    case "--json": jsonPath = arguments.isEmpty ? nil : arguments.removeFirst()
    case "--markdown": markdownPath = arguments.isEmpty ? nil : arguments.removeFirst()
    default:
        note("usage: prefskv-bench [--quick] [--json PATH] [--markdown PATH]")
        exit(64)
    }
}

var orchestrator = Orchestrator(quick: quick)
let results = orchestrator.run()
let markdown = Report.markdown(results)
print(markdown)
func save(_ text: [UInt8], to path: String) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    guard fd >= 0 else {
        note("cannot write \(path): errno \(errno)")
        exit(1)
    }
    _ = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
}
if let markdownPath { save(Array(markdown.utf8), to: markdownPath) }
if let jsonPath {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    save(Array(try encoder.encode(results)), to: jsonPath)
}
