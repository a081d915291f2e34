// PrefsKV and SecureVault against SQLite, LMDB and libsecret, side by side, in one run.
//
//   prefskv-bench [--quick] [--json PATH] [--markdown PATH]   run everything; the report goes to stdout
//   prefskv-bench curves [--quick] [--json PATH] [--markdown PATH]   the scaling curves only (Curves.swift)
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
let curves = arguments.first == "curves"
if curves { arguments.removeFirst() }
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
        note("usage: prefskv-bench [curves] [--quick] [--json PATH] [--markdown PATH]")
        exit(64)
    }
}

func save(_ text: [UInt8], to path: String) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    guard fd >= 0 else {
        note("cannot write \(path): errno \(errno)")
        exit(1)
    }
    _ = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
}
@MainActor func report(_ markdown: String, _ json: some Encodable) throws {
    print(markdown)
    if let markdownPath { save(Array(markdown.utf8), to: markdownPath) }
    if let jsonPath {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        save(Array(try encoder.encode(json)), to: jsonPath)
    }
}
if curves {
    var run = Curves(quick: quick)
    let results = run.run()
    try report(Curves.markdown(results), results)
} else {
    var orchestrator = Orchestrator(quick: quick)
    let results = orchestrator.run()
    try report(Report.markdown(results), results)
}
