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
        var snippets: [String] = []
        for number in 1... {
            guard source.contains("// README snippet \(number) begin\n") else { break }
            let body = source.components(separatedBy: "// README snippet \(number) begin\n")[1]
                .components(separatedBy: "    // README snippet \(number) end")[0]
            snippets.append(
                body.split(separator: "\n", omittingEmptySubsequences: false).map { $0.dropFirst(4) }
                    .joined(separator: "\n"))
        }
        #expect(snippets.count == 3)
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
