public import Logging

extension PrefsStore {
    /// How a store is opened: durability, sharing between processes, recovery policy, sealing and logging.
    ///
    /// ```swift
    /// var configuration = PrefsStore.Configuration()
    /// configuration.durability = .synchronous
    /// let store = try PrefsStore(id: "vault", configuration: configuration)
    /// ```
    public struct Configuration: Sendable {
        /// When a write reaches the disk. The default is ``Durability/buffered``.
        public var durability: Durability = .buffered
        /// Whether other processes may open the store at the same time. The default is
        /// ``Sharing/multiProcess``.
        public var sharing: Sharing = .multiProcess
        /// What an open does with a damaged file. The default is ``RecoveryPolicy/salvage``.
        public var recovery: RecoveryPolicy = .salvage
        /// What an open does with a data file it cannot read as a store at all: not a PrefsKV file, or no copy of
        /// its header verifies (a damaged log or header page is `recovery`'s). The default,
        /// ``UnreadableFilePolicy/refuse``, throws and leaves the file byte-identical;
        /// ``PrefsStore/openOrLog(id:directory:configuration:ifUnreadable:)`` rebuilds it from what verifies in
        /// its body, keeping the original, unless told otherwise.
        public var unreadableFile: UnreadableFilePolicy = .refuse
        /// Opens the store for reading only: nothing is created (a missing store is ``PrefsError/Code/notFound``),
        /// the open takes no writer lock and never writes the file (damage is salvaged in memory, the file left
        /// as it is), and every write throws ``PrefsError/Code/readOnly``. The handle still follows what other
        /// processes write. For a second tool beside the app: a settings inspector, a crash reporter. The default
        /// is `false`. (A store in a directory this process cannot write opens read-only whatever this says.)
        ///
        /// ```swift
        /// var configuration = PrefsStore.Configuration()
        /// configuration.readOnly = true
        /// let inspector = try PrefsStore(id: "ui", directory: directory, configuration: configuration)
        /// ```
        public var readOnly = false
        /// Seals keys and values on disk. The default is `nil`: a plain store.
        public var sealer: (any PrefsSealer)? {
            get { references.sealer }
            set { references = References(sealer: newValue, logger: references.logger, label: references.label) }
        }
        /// Keeps the values a sealed store's reads open in this handle's memory, so that reading a key again
        /// answers without the sealer (about twice a plain store's read, instead of twenty times). For encrypted
        /// *preferences* that are not secrets, read often: a theme, a window layout. Never for tokens or keys. The
        /// default is `false`: a sealed store then keeps no plaintext past the read that opened it. No effect on a
        /// plain store.
        ///
        /// What it keeps: the plain value of each key read (values up to 64 KiB; 8 MiB and 16,384 values in all,
        /// counting each value's record), in ordinary memory of this process (it may reach swap or a core dump, as
        /// any app data does).
        /// A value found no longer the store's is wiped at once, the values of a former image (after a compaction)
        /// at the first read after it, and all of them when the handle is released: release the handle when the
        /// values must go (at logout). A cached value answers only while it is exactly what a read without the
        /// cache would answer: the record it was opened from still the one the store means, and in the file byte
        /// for byte. A new value, written here or by any other process, is opened and checked again; a writer of
        /// the file can make the cache answer nothing the sealer did not seal.
        ///
        /// ```swift
        /// var configuration = PrefsStore.Configuration()
        /// configuration.cachesPlaintext = true
        /// let ui = try vault.encryptedPreferences(id: "ui", configuration: configuration)
        /// ```
        public var cachesPlaintext = false
        /// Compacts on its own after a write when garbage is at least half the log and the log has reached three
        /// quarters of this many bytes; `nil` turns automatic compaction off. A store with less live data than 3/8 of
        /// it then keeps its file at this size at most; a larger one within about 2.25 times its live data (and, from
        /// 256 keys, twice its persisted index). The default is 256 KiB: each compaction writes the live records into a
        /// new file and renames it into place, so a store whose few keys are rewritten all the time pays that once per
        /// about 190 KiB of writes (a smaller threshold compacts more often, and costs more a write). A
        /// ``Durability/synchronous`` store also flushes each new file (an `fdatasync` and a directory `fsync`); a
        /// ``Durability/buffered`` one does not, and keeps its last synced file as `<id>.prefs.prev` until the next
        /// ``PrefsStore/sync()``, which recovers the store after a power cut in between; it also keeps the file its
        /// last automatic compaction replaced as `<id>.prefs.tmp`, when its size fits, and writes the next image into
        /// it (two files alternate, none is created or freed, which makes a rewrite of a large value several times
        /// cheaper). ``PrefsStore/sync()`` removes both; a handle closed without it leaves them until the next
        /// ``PrefsStore/sync()`` or compaction. A store that is rarely rewritten stays small: its file grows from 4 KiB
        /// as its log does. It must be positive: an open with 0 or less throws ``PrefsError/Code/invalidInput`` (0 does
        /// not turn it off; `nil` does).
        public var autoCompactionThreshold: Int? = 256 * 1024
        /// Where recovery reports and compaction failures are logged. Values are never logged. The default
        /// is a logger labelled "prefskv".
        public var logger: Logger {
            get { references.logger ?? Logger(label: references.label) }
            set { references = References(sealer: references.sealer, logger: newValue, label: references.label) }
        }
        /// The label of the default logger (a store SecureVault opens logs under its own, "securevault").
        package var defaultLoggerLabel: String {
            get { references.label }
            set { references = References(sealer: references.sealer, logger: references.logger, label: newValue) }
        }
        /// The sealer and the app's logger, if any, held by reference: a configuration is then a few plain
        /// words and one reference, copied with a retain. (Copying inline optional fields went through their
        /// type metadata, which a fresh process instantiates at its first open.) The default logger is made when
        /// something is logged, not when a configuration is: the first `Logger` of a process sets up swift-log's
        /// logging system, a large share of a fresh process's first open.
        private var references = References.none

        /// A configuration with every default.
        ///
        /// ```swift
        /// let store = try PrefsStore(id: "ui", configuration: .init())
        /// ```
        public init() {}
    }

    /// A configuration's sealer and logger (immutable: a change makes a new one).
    final class References: Sendable {
        static let none = References(sealer: nil, logger: nil, label: "prefskv")
        let sealer: (any PrefsSealer)?
        let logger: Logger?
        let label: String
        init(sealer: (any PrefsSealer)?, logger: Logger?, label: String) {
            self.sealer = sealer
            self.logger = logger
            self.label = label
        }
    }

    /// When a write reaches the disk.
    ///
    /// ```swift
    /// configuration.durability = .synchronous   // fsync before every write returns
    /// ```
    public struct Durability: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String { case buffered, synchronous }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// A write is acknowledged once it is in the shared mapping: it survives the process being killed
        /// at any instant; a power loss keeps what was written before the last ``PrefsStore/sync()`` (or
        /// ``PrefsStore/compact()``). Automatic compactions do not wait for the disk (see
        /// ``PrefsStore/Configuration/autoCompactionThreshold``).
        public static let buffered = Durability(.buffered)
        /// A write's records are flushed with a word that names them before its log end is published and the
        /// write returns: a power loss keeps every acknowledged write. Costs one `fdatasync` per write (two in a
        /// file of format version 6 or older, until its next compaction, or where the file system has no open
        /// file description locks). A write whose flush fails throws ``PrefsError/Code/io``: it is not published,
        /// unless the flush that failed came after its publish (the second of two, or the directory's, made by the
        /// first write after the file's name changed without this handle flushing the directory), which leaves it
        /// published with its durability unknown.
        public static let synchronous = Durability(.synchronous)

        public var description: String { value.rawValue }
    }

    /// Whether other processes may use the store at the same time.
    ///
    /// ```swift
    /// configuration.sharing = .singleProcess   // no lock per write; a second opener gets `busy`
    /// ```
    public struct Sharing: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String { case multiProcess, singleProcess }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// Several processes and handles may open the store; each write transaction takes the writer lock (a
        /// robust process-shared mutex in `<id>.prefs.lock`: no system call when uncontended) and first reads
        /// what others appended.
        public static let multiProcess = Sharing(.multiProcess)
        /// This handle holds the store exclusively for its lifetime, so writes take no lock. Any other
        /// open of the store, in this process or another, fails with ``PrefsError/Code/busy``.
        public static let singleProcess = Sharing(.singleProcess)

        public var description: String { value.rawValue }
    }

    /// What an open does with a data file it cannot read as a store at all: not a PrefsKV file, or no copy of its
    /// header verifies (a damaged header page alone is not that: the copy that starts the log is read instead, and
    /// the file recovered under ``RecoveryPolicy``).
    ///
    /// ```swift
    /// configuration.unreadableFile = .quarantineAndRebuild   // app state: never stuck on a bad file
    /// ```
    public struct UnreadableFilePolicy: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String { case refuse, quarantineAndRebuild }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// Throws (``PrefsError/Code/notAStore`` or ``PrefsError/Code/corrupted``) and leaves the file
        /// byte-identical: nothing is ever written over a file that could not be read.
        public static let refuse = UnreadableFilePolicy(.refuse)
        /// Rebuilds the store from the records of the file's body that still verify (a plain store's by their
        /// checksum; a sealed store's by authenticating them with the key, under the store identity read from
        /// any damaged copy of its header), keeps the original byte for byte as `<id>.prefs.corrupt-<UTC time>`
        /// (mode 0400), logs one error naming both files, and reports it in ``PrefsStore/lastRecovery``. With
        /// nothing that verifies, the new store is empty (0 kept). Applies whatever the ``RecoveryPolicy``. For
        /// state the app can rebuild (UI state): the user's next choices are saved again. Only a regular file is
        /// rebuilt; a read-only handle, denied permissions, a wrong key, a newer format, and sealed records of
        /// which none authenticates (a wrong key cannot be told from a lost identity) still throw, the file
        /// untouched.
        /// ``PrefsStore/repair(id:directory:configuration:)`` does the same on request.
        public static let quarantineAndRebuild = UnreadableFilePolicy(.quarantineAndRebuild)

        public var description: String { value.rawValue }
    }

    /// What an open does when the file is damaged.
    ///
    /// ```swift
    /// configuration.recovery = .fail   // let the app decide; the file stays untouched
    /// ```
    public struct RecoveryPolicy: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String { case salvage, fail }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// Keeps every record that verifies, copies the damaged original to `<id>.prefs.corrupt-<UTC time>`
        /// (mode 0400), writes a fresh image, logs one error and reports it in ``PrefsStore/lastRecovery``.
        public static let salvage = RecoveryPolicy(.salvage)
        /// Throws ``PrefsError/Code/corrupted`` describing the damage and leaves the file untouched.
        public static let fail = RecoveryPolicy(.fail)

        public var description: String { value.rawValue }
    }
}

extension PrefsStore.Configuration {
    /// Throws ``PrefsError/Code/invalidInput`` for a setting no store can run with, before anything is opened.
    func validate() throws(PrefsError) {
        if let threshold = autoCompactionThreshold, threshold <= 0 {
            throw PrefsError(
                .invalidInput,
                "autoCompactionThreshold must be a positive number of bytes (nil turns automatic compaction off): "
                    + "got \(threshold)")
        }
    }
}
