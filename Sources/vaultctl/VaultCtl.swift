@main
struct VaultCtl {
    static func main() {}
}
