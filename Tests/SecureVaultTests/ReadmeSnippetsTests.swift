import Foundation
import Testing
import TestSupport

/// The README's Swift is the code of `Examples/ClientApp`, which `make test` builds as a consumer of this package
/// and runs against a real gnome-keyring: its `Package.swift` is the README's, and every snippet of "Using it"
/// is in its `main.swift`, verbatim between markers, in the context the README gives it (synchronous code, then
/// async code). This test keeps the two from drifting apart.
@Suite struct ReadmeSnippetsTests {
    static let root = BuildProducts.repositoryRoot

    /// The README's ```swift blocks.
    static func readmeBlocks() throws -> [String] {
        let readme = try String(contentsOfFile: root + "/README.md", encoding: .utf8)
        return readme.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
    }

    @Test func theClientAppPackageIsTheReadmes() throws {
        let package = try String(contentsOfFile: Self.root + "/Examples/ClientApp/Package.swift", encoding: .utf8)
        #expect(try Self.readmeBlocks().contains(package), "README's Package.swift block drifted from Examples/ClientApp")
    }

    @Test func everyUsingItSnippetIsInTheClientAppVerbatim() throws {
        let source = try String(contentsOfFile: Self.root + "/Examples/ClientApp/Sources/ClientApp/main.swift", encoding: .utf8)
        let lines = source.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var snippets: [String] = []
        for number in 1... {
            // Between the markers, de-indented by the begin marker's indentation.
            guard let begin = lines.firstIndex(where: { $0.hasSuffix("// README snippet \(number) begin") }),
                let end = lines[begin...].firstIndex(where: {
                    $0.trimmingCharacters(in: .whitespaces) == "// README snippet \(number) end"
                })
            else { break }
            let indent = lines[begin].prefix { $0 == " " }.count
            snippets.append(lines[(begin + 1)..<end].map { String($0.dropFirst(indent)) }.joined(separator: "\n") + "\n")
        }
        #expect(snippets.count == 5)
        // README blocks of "Using it": the Package.swift and the server's are checked elsewhere.
        let blocks = try Self.readmeBlocks().filter {
            !$0.hasPrefix("// swift-tools-version") && !$0.contains("systemdCredential")
        }
        #expect(blocks.count == snippets.count, "\(blocks.count) README snippets, \(snippets.count) in the client app")
        for (block, snippet) in zip(blocks, snippets) {
            // A snippet's import lines go at the top of the app's file.
            let code = block.split(separator: "\n", omittingEmptySubsequences: false)
                .drop { $0.hasPrefix("import ") || $0.isEmpty }.joined(separator: "\n")
            #expect(code == snippet, "README snippet drifted from Examples/ClientApp:\n\(code)\n---\n\(snippet)")
        }
    }
}
