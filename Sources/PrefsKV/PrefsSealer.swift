/// The encryption seam: seals and opens record values, and names keys by a keyed tag, so that neither keys
/// nor values are readable on disk. PrefsKV defines it; SecureVault implements it with libsodium.
///
/// In a sealed store the on-disk key field holds `tag(forKey:)` and the value field holds
/// `seal(u32 nameLength | name | value bytes)` with associated data `store UUID | tag | valueType | expiresAt`:
/// a ciphertext moved under another key, into another store, or with an altered type or expiry fails to open.
/// Both `seal` and `open` must authenticate: `open` throws when the bytes or the associated data were altered.
///
/// Every record of a sealed store (sets, deletes, remove-alls and transaction commits) also carries a 16-byte
/// authenticator from `authenticate(context:record:into:)` that binds it to the store, the file generation and its
/// offset: a record forged without the key, replayed from an older copy of the file or moved is refused as
/// tampered when the log is read (format version 2; Documentation/FileFormat.md).
/// A sealer is a class (it holds a key; a store keeps a reference to it, and copying one costs a retain).
///
/// PrefsKV never hands a sealer the store's file mapping, which another process may write meanwhile: `seal` writes
/// into private memory that PrefsKV copies into the file afterwards, and `open` and `authenticate` read private
/// copies PrefsKV made and checks nothing else against. A sealer may read its input more than once.
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

    /// Whether `tag(forKey:)` costs less than looking a name up in a map of the tags already computed (a keyed BLAKE2b
    /// tag costs more, SipHash less). When false (the default), PrefsKV remembers the tags of up to 16,384 names a
    /// handle used; when true, it computes the tag at every access, with `tag(forKey:into:)`, and keeps no such map. A
    /// sealer whose tags are cheap gives every tag the same length, at most 64 bytes.
    ///
    /// ```swift
    /// var tagsAreCheap: Bool { true }   // tags are SipHash-2-4-128
    /// ```
    var tagsAreCheap: Bool { get }

    /// Writes the tag of `key` into `output`, which is exactly as long as the sealer's tags: the same bytes as
    /// `tag(forKey:)`, without an array. PrefsKV calls it when `tagsAreCheap` is true. The default implementation
    /// copies `tag(forKey:)`.
    ///
    /// ```swift
    /// func tag(forKey key: String, into output: UnsafeMutableRawBufferPointer) {
    ///     var name = key
    ///     name.withUTF8 { siphash128(UnsafeRawBufferPointer($0), key: nameKey, into: output) }
    /// }
    /// ```
    func tag(forKey key: String, into output: UnsafeMutableRawBufferPointer)

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

    /// Opens `sealed` into `plaintext`, which is exactly `sealed.count - overhead` bytes of memory PrefsKV
    /// provides (and wipes once it has used the value). Throws when authentication fails. PrefsKV reads values
    /// through this one; the default implementation calls `open(_:associatedData:_:)` and copies. A sealer
    /// implements it itself to read without the generic call (no type metadata built per read).
    ///
    /// ```swift
    /// try withUnsafeTemporaryAllocation(byteCount: sealed.count - sealer.overhead, alignment: 16) { plain in
    ///     try sealer.open(sealed, associatedData: ad, into: plain)
    /// }
    /// ```
    func open(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
        into plaintext: UnsafeMutableRawBufferPointer
    ) throws

    /// Writes into `output` (exactly 16 bytes) a keyed MAC of `context` followed by `record`: a deterministic
    /// function of the two under a key only the sealer holds (for example keyed BLAKE2b under a subkey of the
    /// master key), which nobody without that key can compute. PrefsKV compares it in constant time.
    func authenticate(
        context: UnsafeRawBufferPointer, record: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer)

    /// Whether a sealed store written before record authentication (format version 1: its records carry no
    /// authenticator, so whoever can write the file can forge them) may be opened with this sealer. Such a store
    /// is upgraded to the current version by its next compaction, recovery or rekey. Return false for a key that has
    /// never been used with version 1, so that a header rewritten to version 1 is refused as tampered instead of
    /// opening a log whose records nobody checks.
    var acceptsUnauthenticatedLog: Bool { get }
}

extension PrefsSealer {
    /// False: PrefsKV remembers the tags of the names a handle used.
    public var tagsAreCheap: Bool { false }

    /// Copies `tag(forKey:)` into `output`.
    public func tag(forKey key: String, into output: UnsafeMutableRawBufferPointer) {
        let tag = tag(forKey: key)
        precondition(tag.count == output.count, "a cheap sealer's tags all have one length")
        output.copyBytes(from: tag)
    }

    /// Opens through `open(_:associatedData:_:)` and copies the plaintext into `plaintext`.
    public func open(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
        into plaintext: UnsafeMutableRawBufferPointer
    ) throws {
        try open(sealed, associatedData: associatedData) { (plain: UnsafeRawBufferPointer) throws -> Void in
            guard plain.count == plaintext.count else { throw PrefsSealerLengthMismatch() }
            if !plain.isEmpty { plaintext.copyMemory(from: plain) }
        }
    }
}

/// A sealer's `open` gave a plaintext of another length than `sealed.count - overhead`.
struct PrefsSealerLengthMismatch: Error {}
