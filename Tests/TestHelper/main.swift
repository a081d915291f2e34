// vault-test-helper: run by the tests as a child process.
