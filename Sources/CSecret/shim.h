#ifndef CSECRET_SHIM_H
#define CSECRET_SHIM_H
#include <libsecret/secret.h>
#endif
