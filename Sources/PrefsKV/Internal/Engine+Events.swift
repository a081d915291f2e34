// A handle's events: the changes its observers are told of and the lines it logs, queued under the handle's lock and
// delivered by the public layer outside it (`PrefsStore.deliverEvents`).
import Logging

extension Engine {
    /// Queues the keys whose values differ between an old mapping and the current state.
    func noteChanges(from oldFile: MappedFile, oldIndex: KeyIndex, isExternal: Bool) {
        let changed = codec.names(
            forIndexKeys: codec.changedIndexKeys(in: log, from: oldFile, oldIndex: oldIndex), in: log,
            formerImage: log.stillShowsItsImage(oldFile) ? (oldFile, oldIndex, oldFile.adoptedIdentity.image) : nil)
        if !changed.isEmpty { pendingChanges.append(PrefsChange(keys: changed, isExternal: isExternal)) }
    }

    /// A write that threw: when it was published before (a flush after its publish failed: the log end moved from
    /// `published`), its change is queued for this handle's observers all the same, as other handles hear of it.
    /// Returns `error`, to throw.
    @inline(never)
    func queueIfPublished(_ error: PrefsError, since published: UInt64, _ keys: [String]) -> PrefsError {
        if wantsChanges, !keys.isEmpty, log.knownEndWord != published {
            pendingChanges.append(PrefsChange(keys: KeyIndex.sortedUnique(keys), isExternal: false))
        }
        return error
    }

    /// The queued changes and log lines, taken; with `externalOnly`, the changes of other processes only (this
    /// handle's own writes stay queued, in order, for the writer that made them).
    func takeEvents(
        externalOnly: Bool = false
    ) -> (
        changes: [PrefsChange], log: [(level: Logger.Level, message: Logger.Message)]
    ) {
        defer { pendingLog.removeAll() }
        guard externalOnly, pendingChanges.contains(where: { !$0.isExternal }) else {
            defer { pendingChanges.removeAll() }
            return (pendingChanges, pendingLog)
        }
        let external = pendingChanges.filter(\.isExternal)
        pendingChanges.removeAll { $0.isExternal }
        return (external, pendingLog)
    }
}
