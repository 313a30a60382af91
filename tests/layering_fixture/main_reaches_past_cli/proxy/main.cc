// Fixture for the layering test: main.cc runs the commands of cli/ and includes nothing else of
// ours.
#include "proxy/cli/cli.h"
#include "proxy/server/server.h"
