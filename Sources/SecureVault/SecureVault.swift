// SecureVault: secrets sealed with libsodium under a master key kept in the Secret Service.
