// PrefsKV: a memory-mapped, append-only, crash-safe key-value store. (Being built: see issue 3.)
