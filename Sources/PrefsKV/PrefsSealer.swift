/// The encryption seam: seals and opens record values, and names keys by a keyed tag, so that neither keys
/// nor values are readable on disk. PrefsKV defines it; SecureVault implements it with libsodium.
///
/// In a sealed store the on-disk key field holds `tag(forKey:)` and the value field holds
/// `seal(u32 nameLength | name | value bytes)` with associated data `store UUID | tag | valueType | expiresAt`:
/// a ciphertext moved under another key, into another store, or with an altered type or expiry fails to open.
/// Both `seal` and `open` must authenticate: `open` throws when the bytes or the associated data were altered.
/// A sealer is a class (it holds a key; a store keeps a reference to it, and copying one costs a retain).
///
/// ```swift
/// var configuration = PrefsStore.Configuration()
/// configuration.sealer = try VaultSealer(masterKey: key)   // SecureVault's implementation
/// let vault = try PrefsStore(id: "vault", directory: dir, configuration: configuration)
/// ```
public protocol PrefsSealer: AnyObject, Sendable {
    /// A value derived from the key, stored in the header when the store is created and compared at every
    /// open: it tells a wrong key from damage before any record is read. At most 64 bytes.
    var keyCheck: [UInt8] { get }

    /// The deterministic keyed tag under which `key` is stored (at most 16 KiB; 16 to 32 bytes is usual).
    /// Equal keys give equal tags; the key's name never reaches the disk.
    func tag(forKey key: String) -> [UInt8]

    /// The number of bytes `seal` adds to a plaintext (nonce and authenticator), at most 1024.
    var overhead: Int { get }

    /// Seals `plaintext` into `output`, which is exactly `plaintext.count + overhead` bytes long.
    func seal(
        _ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
        into output: UnsafeMutableRawBufferPointer
    ) throws

    /// Opens `sealed` and passes the plaintext to `body`; the plaintext may live in the sealer's own memory
    /// and must not escape `body`. Throws when authentication fails.
    func open<R>(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R
}
