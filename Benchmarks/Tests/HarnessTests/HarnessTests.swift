// Runs the built harness in quick mode, as `make bench-quick` does, and checks that every workload produced
// figures for every engine. It checks that the harness works, not what the figures are.
import BenchmarkKit
import FoundationEssentials
import Glibc
import Testing

@Suite struct HarnessTests {
    @Test func quickModeProducesEveryWorkloadForEveryEngine() throws {
        let directory = makeScratchDirectory(in: environment("TMPDIR") ?? "/tmp", prefix: "harness-test.")
        defer { removeTree(directory) }
        let json = directory + "/results.json"
        let markdown = directory + "/results.md"
        let run = runChild(executableDirectory + "/prefskv-bench", ["--quick", "--json", json, "--markdown", markdown])
        #expect(run.status == 0)
        // Quick mode's promise: under a minute (a debug build is slower than release; this one is allowed 90 s).
        #expect(run.wallNanoseconds < 90_000_000_000)

        let data = try #require(readWholeFile(json).map { Data($0) })
        let results = try JSONDecoder().decode(Results.self, from: data)
        #expect(results.quick)

        func expectRows(_ section: Section, _ workloads: [Workload], _ engines: [String]) {
            for workload in workloads {
                for engine in engines {
                    let rows = results.rows.filter {
                        $0.section == section && $0.workload == workload && $0.engine == engine
                    }
                    #expect(!rows.isEmpty, "no \(section.rawValue) \(workload.rawValue) row for \(engine)")
                    for row in rows {
                        #expect(!row.samples.isEmpty && row.samples.allSatisfy { $0 > 0 }, "\(row.id): \(row.samples)")
                        if section != .vault {
                            #expect(row.peakRSSKiB.allSatisfy { $0 > 0 }, "\(row.id) has no peak RSS")
                        }
                    }
                }
            }
        }
        let writes: [Workload] = [.setInt, .setString, .overwriteHot, .blob]
        expectRows(
            .writes, writes,
            ["prefskv", "prefskv-single", "prefskv-encrypted", "prefskv-observed", "sqlite", "sqlite-one-txn", "lmdb-nosync"])
        expectRows(.strict, writes, ["prefskv-synchronous", "sqlite-full", "lmdb-sync"])
        expectRows(.reads, [.get], ["prefskv", "prefskv-single", "prefskv-encrypted", "sqlite", "lmdb-nosync"])
        expectRows(.cold, [.cold], ["prefskv", "prefskv-single", "prefskv-encrypted", "sqlite", "lmdb-nosync"])
        expectRows(.multiProcess, [.mpRead], ["prefskv", "sqlite", "lmdb-nosync"])
        expectRows(
            .vault, [.tokenWarm], ["SecureVault sessionToken(), warm"])
        expectRows(.vault, [.tokenSet], ["SecureVault setSessionToken (synchronous)"])
        expectRows(.vault, [.sealOpen], ["VaultSealer seal + open, 256 bytes"])
        // Two sizes of cold open and the second store of a process, and the file sizes of the write workloads.
        #expect(Set(results.rows.filter { $0.section == .cold }.map(\.label)).count == 3)
        for row in results.rows where row.section == .writes {
            #expect(row.fileBytes.allSatisfy { $0 > 0 } && !row.fileBytes.isEmpty, "\(row.id) has no file size")
        }
        // Inside `make test` (scripts/with-keyring.sh) the Secret Service is there: the cold token reads ran.
        if environment("VAULT_TEST_KEYRING") == "1" {
            for name in [
                "SecureVault sessionToken()", "bare libsecret lookup (C)", "secret-tool lookup", "empty C process",
            ] {
                #expect(
                    results.rows.contains { $0.section == .vault && $0.workload == .cold && $0.engine == name },
                    "no cold vault row \(name)")
            }
        }

        let report = String(decoding: try #require(readWholeFile(markdown)), as: UTF8.self)
        for heading in ["## Writes", "## Reads", "## Cold open", "## Strictest durability", "## Reads in one process",
            "## SecureVault", "MMKV 2.4, from DESIGN.md"]
        {
            #expect(report.contains(heading), "the report has no \(heading)")
        }
        #expect(report.contains("/ sqlite"))
    }

    /// The curves' quick mode: every metric of every engine at every point of both axes, with a figure.
    @Test func curvesQuickModeProducesEveryPoint() throws {
        let directory = makeScratchDirectory(in: environment("TMPDIR") ?? "/tmp", prefix: "harness-curves.")
        defer { removeTree(directory) }
        let json = directory + "/curves.json"
        let markdown = directory + "/curves.md"
        let run = runChild(
            executableDirectory + "/prefskv-bench", ["curves", "--quick", "--json", json, "--markdown", markdown])
        #expect(run.status == 0)
        let results = try JSONDecoder().decode(
            CurveResults.self, from: try #require(readWholeFile(json).map { Data($0) }))
        #expect(results.quick)
        for engine in Curves.engines.map(\.rawValue) {
            for x in results.scale.keyCounts {
                for metric in Curves.metrics {
                    let point = results.point(metric, .keys, x, engine)
                    #expect(point.map { !$0.samples.isEmpty && $0.samples.allSatisfy { $0 > 0 } } == true,
                        "\(metric) at \(x) keys for \(engine): \(String(describing: point?.samples))")
                }
            }
            for x in results.scale.valueSizes {
                for metric in Curves.metrics where metric != "overwrite" {
                    let point = results.point(metric, .valueBytes, x, engine)
                    #expect(point.map { !$0.samples.isEmpty && $0.samples.allSatisfy { $0 > 0 } } == true,
                        "\(metric) at \(x) value bytes for \(engine): \(String(describing: point?.samples))")
                }
            }
        }
        let report = String(decoding: try #require(readWholeFile(markdown)), as: UTF8.self)
        #expect(report.contains("### cold open + first read, by keys"))
        #expect(report.contains("### file size on disk, by value bytes"))
    }
}
