// LMDB with a write transaction per put (as a key-value store for app state would use it).
import CLMDB
import FoundationEssentials
import Glibc

final class LMDBEngine: KVEngine {
    private var env: OpaquePointer?
    private var dbi: MDB_dbi = 0
    /// One read transaction, reset and renewed around each get (LMDB's cheap path for point reads).
    private var reader: OpaquePointer?
    let directory: String

    init(directory: String, sync: Bool) throws {
        self.directory = directory + "/bench.lmdb"
        mkdir(self.directory, 0o700)
        try check(mdb_env_create(&env), "mdb_env_create")
        try check(mdb_env_set_mapsize(env, 1 << 30), "mdb_env_set_mapsize")
        let flags = UInt32(sync ? 0 : MDB_NOSYNC)
        try check(mdb_env_open(env, self.directory, flags, 0o600), "mdb_env_open")
        var txn: OpaquePointer?
        try check(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
        try check(mdb_dbi_open(txn, nil, 0, &dbi), "mdb_dbi_open")
        try check(mdb_txn_commit(txn), "mdb_txn_commit")
    }

    deinit {
        if let reader { mdb_txn_abort(reader) }
        mdb_env_close(env)
    }

    private func check(_ rc: Int32, _ what: String) throws {
        guard rc == 0 else { throw BenchError("lmdb: \(what): \(String(cString: mdb_strerror(rc)))") }
    }

    @inline(__always)
    private func put(_ key: String, _ bytes: UnsafeRawBufferPointer) throws {
        var key = key
        try key.withUTF8 { utf8 in
            var k = MDB_val(mv_size: utf8.count, mv_data: UnsafeMutableRawPointer(mutating: utf8.baseAddress))
            var v = MDB_val(mv_size: bytes.count, mv_data: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
            var txn: OpaquePointer?
            try check(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
            let rc = mdb_put(txn, dbi, &k, &v, 0)
            guard rc == 0 else {
                mdb_txn_abort(txn)
                try check(rc, "mdb_put")
                return
            }
            try check(mdb_txn_commit(txn), "mdb_txn_commit")
        }
    }

    func setInt(_ key: String, _ value: Int) throws {
        try withUnsafeBytes(of: Int64(value).littleEndian) { try put(key, $0) }
    }

    func setString(_ key: String, _ value: String) throws {
        var value = value
        try value.withUTF8 { try put(key, UnsafeRawBufferPointer($0)) }
    }

    func getInt(_ key: String) throws -> Int? {
        try withValue(key) { v in
            guard v.mv_size == 8 else { throw BenchError("lmdb: value of \(v.mv_size) bytes") }
            return Int(Int64(littleEndian: v.mv_data.loadUnaligned(as: Int64.self)))
        }
    }

    /// Looks `key` up in the renewed read transaction and hands `body` the value while the transaction holds it.
    @inline(__always)
    private func withValue<R>(_ key: String, _ body: (MDB_val) throws -> R) throws -> R? {
        if let reader {
            try check(mdb_txn_renew(reader), "mdb_txn_renew")
        } else {
            try check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &reader), "mdb_txn_begin")
        }
        defer { mdb_txn_reset(reader) }
        var key = key
        return try key.withUTF8 { utf8 -> R? in
            var k = MDB_val(mv_size: utf8.count, mv_data: UnsafeMutableRawPointer(mutating: utf8.baseAddress))
            var v = MDB_val()
            let rc = mdb_get(reader, dbi, &k, &v)
            if rc == MDB_NOTFOUND { return nil }
            try check(rc, "mdb_get")
            return try body(v)
        }
    }

    func setBytes(_ key: String, _ value: Data) throws {
        try value.withUnsafeBytes { try put(key, $0) }
    }

    func getBytes(_ key: String) throws -> Data? {
        try withValue(key) { Data(bytes: $0.mv_data, count: $0.mv_size) }
    }

    var files: [String] { [directory] }
}
