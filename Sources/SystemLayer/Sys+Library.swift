// Shared libraries loaded when first needed (dlopen), not by the dynamic linker at every process start.
import Glibc

/// A system library a module loads only on the path that needs it, kept for the life of the process. A library
/// named in a product's link line is loaded, relocated and initialized in every process that links the product,
/// used or not: OpenSSL's libcrypto alone made each vaultctl start bind 3,400 symbols, for the one command that
/// imports an encrypted MMKV store.
///
///     let library = try SharedLibrary.load(firstOf: ["libcrypto.so.3", "libcrypto.so"]).get()
///     typealias NewContext = @convention(c) () -> OpaquePointer?
///     let newContext = try library.function("EVP_CIPHER_CTX_new", as: NewContext.self).get()
package struct SharedLibrary: @unchecked Sendable {
    /// Why a library or one of its functions could not be had, in the dynamic linker's words.
    package struct Failure: Error, Sendable {
        package let message: String
    }

    // Never closed: the library's functions may be held anywhere in the process.
    private let handle: UnsafeMutableRawPointer

    /// The library's name as loaded.
    package let name: String

    /// The first of `names` (sonames, tried in order, searched as the dynamic linker searches) that loads, its
    /// symbols bound at once and kept to itself (`RTLD_NOW | RTLD_LOCAL`); the failure says what each name gave.
    // See: man 3 dlopen
    package static func load(firstOf names: [String]) -> Result<SharedLibrary, Failure> {
        var reasons: [String] = []
        for name in names {
            if let handle = dlopen(name, RTLD_NOW | RTLD_LOCAL) {
                return .success(SharedLibrary(handle: handle, name: name))
            }
            reasons.append(dlerror().map { String(cString: $0) } ?? "\(name): not loaded")
        }
        return .failure(Failure(message: reasons.joined(separator: "; ")))
    }

    /// The function `symbol` as the C function type `F` (a `@convention(c)` type the caller declares to match the
    /// library's header: nothing checks the signature).
    // See: man 3 dlsym
    package func function<F>(_ symbol: String, as type: F.Type) -> Result<F, Failure> {
        precondition(MemoryLayout<F>.size == MemoryLayout<UnsafeRawPointer>.size, "\(F.self) is not a C function type")
        guard let address = dlsym(handle, symbol) else {
            return .failure(Failure(message: "\(name) has no function \(symbol)"))
        }
        return .success(unsafeBitCast(address, to: F.self))
    }
}
