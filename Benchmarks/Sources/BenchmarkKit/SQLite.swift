// SQLite as an app would use it for key-value state: one table, WAL, prepared statements.
import CSQLite
import FoundationEssentials

final class SQLiteEngine: KVEngine {
    private var db: OpaquePointer?
    private var put: OpaquePointer?
    private var get: OpaquePointer?
    private let batch: Bool
    let path: String

    /// `synchronous`: NORMAL (WAL's usual setting: durable at checkpoints) or FULL (a sync per commit).
    init(directory: String, synchronous: String, batch: Bool) throws {
        path = directory + "/bench.sqlite"
        self.batch = batch
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
            == SQLITE_OK
        else { throw BenchError("sqlite3_open_v2 \(path) failed") }
        try exec("PRAGMA journal_mode=WAL")
        try exec("PRAGMA synchronous=\(synchronous)")
        try exec("CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID")
        put = try prepare("INSERT INTO kv (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = ?2")
        get = try prepare("SELECT value FROM kv WHERE key = ?1")
    }

    deinit {
        sqlite3_finalize(put)
        sqlite3_finalize(get)
        sqlite3_close_v2(db)
    }

    private func exec(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw BenchError("sqlite: \(sql): \(String(cString: sqlite3_errmsg(db)))")
        }
    }

    private func prepare(_ sql: String) throws -> OpaquePointer? {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK else {
            throw BenchError("sqlite: prepare \(sql): \(String(cString: sqlite3_errmsg(db)))")
        }
        return statement
    }

    @inline(__always)
    private func withKey<R>(_ key: String, _ statement: OpaquePointer?, _ body: () throws -> R) rethrows -> R {
        var key = key
        return try key.withUTF8 { utf8 in
            sqlite3_bind_text(statement, 1, UnsafeRawPointer(utf8.baseAddress!).assumingMemoryBound(to: CChar.self),
                Int32(utf8.count), nil)
            return try body()
        }
    }

    @inline(__always)
    private func stepPut() throws {
        let rc = sqlite3_step(put)
        sqlite3_reset(put)
        guard rc == SQLITE_DONE else { throw BenchError("sqlite: put: \(String(cString: sqlite3_errmsg(db)))") }
    }

    func setInt(_ key: String, _ value: Int) throws {
        try withKey(key, put) {
            sqlite3_bind_int64(put, 2, sqlite3_int64(value))
            try stepPut()
        }
    }

    func setString(_ key: String, _ value: String) throws {
        var value = value
        try withKey(key, put) {
            try value.withUTF8 { utf8 in
                sqlite3_bind_text(
                    put, 2, UnsafeRawPointer(utf8.baseAddress!).assumingMemoryBound(to: CChar.self), Int32(utf8.count),
                    nil)
                try stepPut()
            }
        }
    }

    func getInt(_ key: String) throws -> Int? {
        try withRow(key) { Int(sqlite3_column_int64(get, 0)) }
    }

    /// Runs the get statement for `key` and hands `body` the row while the statement holds it.
    @inline(__always)
    private func withRow<R>(_ key: String, _ body: () -> R) throws -> R? {
        try withKey(key, get) {
            defer { sqlite3_reset(get) }
            switch sqlite3_step(get) {
            case SQLITE_ROW: return body()
            case SQLITE_DONE: return nil
            default: throw BenchError("sqlite: get: \(String(cString: sqlite3_errmsg(db)))")
            }
        }
    }

    func setBytes(_ key: String, _ value: Data) throws {
        try withKey(key, put) {
            try value.withUnsafeBytes { bytes in
                sqlite3_bind_blob(put, 2, bytes.baseAddress, Int32(bytes.count), nil)
                try stepPut()
            }
        }
    }

    func getBytes(_ key: String) throws -> Data? {
        try withRow(key) {
            let count = Int(sqlite3_column_bytes(get, 0))
            guard count > 0, let blob = sqlite3_column_blob(get, 0) else { return Data() }
            return Data(bytes: blob, count: count)
        }
    }

    func beginBatch() throws { if batch { try exec("BEGIN") } }
    func endBatch() throws { if batch { try exec("COMMIT") } }

    var files: [String] { [path, path + "-wal", path + "-shm"] }
}
