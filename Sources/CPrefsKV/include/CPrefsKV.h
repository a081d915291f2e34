#ifndef CPREFSKV_H
#define CPREFSKV_H

// The module's umbrella header: every header of include/, named here so that adding one changes this file and
// an incremental build's module cache notices (an umbrella directory's new files go unnoticed).
#include "prefs_crc32c.h"
#include "prefs_guard.h"
#include "prefs_nonce.h"
#include "prefs_sys.h"
#include "prefs_tsan.h"

#endif
