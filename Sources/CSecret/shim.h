#ifndef CSECRET_SHIM_H
#define CSECRET_SHIM_H
// The D-Bus-path calls (secret-paths.h) let a lookup search and load without creating an item proxy per match,
// which costs seven extra bus round trips (LibSecret.lookup). Stable in practice since libsecret 0.18.
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <libsecret/secret.h>
// The Secret portal hands its secret over through a pipe passed as a D-Bus file descriptor (SecretPortal).
#include <gio/gunixfdlist.h>
// It connects to the session bus itself, through a socket whose timeout bounds connecting (SecretPortal.Bus).
#include <gio/gunixsocketaddress.h>
#endif
