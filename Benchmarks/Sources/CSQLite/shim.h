#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro casting -1 to a function pointer: not importable into Swift.
static inline sqlite3_destructor_type csqlite_transient(void) { return SQLITE_TRANSIENT; }
