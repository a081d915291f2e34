// OpenSSL's libcrypto, loaded the first time an encrypted MMKV store is read: its AES-CFB-128, as MMKV encrypts.
// Not linked: a process that links PrefsKVMMKV (vaultctl, an app that imports once) would otherwise load and
// relocate libcrypto at every start (3,400 symbol bindings, about 0.8 ms on this project's machines) for an import
// that runs once in its life, if ever.
import PrefsKV
import SystemLayer

/// The libcrypto functions the importer calls, declared as OpenSSL's `evp.h` declares them (an `EVP_CIPHER_CTX *`
/// and an `EVP_CIPHER *` are opaque pointers). Their signatures are the same in OpenSSL 1.1 and 3.
struct LibCrypto: Sendable {
    typealias NewContext = @convention(c) () -> OpaquePointer?
    typealias FreeContext = @convention(c) (OpaquePointer?) -> Void
    typealias Cipher = @convention(c) () -> OpaquePointer?
    /// `EVP_DecryptInit_ex` and `EVP_EncryptInit_ex`: context, cipher, engine, key, IV.
    typealias CipherInit =
        @convention(c) (OpaquePointer?, OpaquePointer?, OpaquePointer?, UnsafePointer<UInt8>?, UnsafePointer<UInt8>?)
        -> Int32
    /// `EVP_DecryptUpdate` and `EVP_EncryptUpdate`: context, output, output length, input, input length.
    typealias CipherUpdate =
        @convention(c) (OpaquePointer?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<Int32>?,
            UnsafePointer<UInt8>?, Int32) -> Int32

    /// Tried in order: OpenSSL 3, 1.1, then whatever the development link names.
    static let names = ["libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.so"]

    let library: SharedLibrary
    let newContext: NewContext
    let freeContext: FreeContext
    let aes128CFB: Cipher
    let aes256CFB: Cipher
    let decryptInit: CipherInit
    let decryptUpdate: CipherUpdate

    /// Loaded once per process, at the first encrypted store read (a static's initializer runs once, under a
    /// lock).
    private static let shared = load(names)

    /// The process's libcrypto; `path` names the store being read in the error when it cannot be loaded.
    static func loaded(for path: String) throws(PrefsError) -> LibCrypto {
        try shared.get(for: path)
    }

    /// The library named by the first of `names` that loads, with every function the importer calls.
    static func load(_ names: [String]) -> Result<LibCrypto, SharedLibrary.Failure> {
        Result { () throws(SharedLibrary.Failure) in
            let library = try SharedLibrary.load(firstOf: names).get()
            return LibCrypto(
                library: library,
                newContext: try library.function("EVP_CIPHER_CTX_new", as: NewContext.self).get(),
                freeContext: try library.function("EVP_CIPHER_CTX_free", as: FreeContext.self).get(),
                aes128CFB: try library.function("EVP_aes_128_cfb128", as: Cipher.self).get(),
                aes256CFB: try library.function("EVP_aes_256_cfb128", as: Cipher.self).get(),
                decryptInit: try library.function("EVP_DecryptInit_ex", as: CipherInit.self).get(),
                decryptUpdate: try library.function("EVP_DecryptUpdate", as: CipherUpdate.self).get())
        }
    }
}

extension Result where Success == LibCrypto, Failure == SharedLibrary.Failure {
    /// The library, or `io` naming the store that needed it and what the dynamic linker said.
    func get(for path: String) throws(PrefsError) -> LibCrypto {
        switch self {
        case .success(let library): return library
        case .failure(let failure):
            throw PrefsError(
                .io,
                "the MMKV store \(path) is encrypted and OpenSSL's libcrypto, which decrypts it, could not be "
                    + "loaded (\(failure.message)); install OpenSSL's library (libssl3, or libssl3t64, on Debian "
                    + "and Ubuntu)",
                path: path)
        }
    }
}
