// The sluice binary. Everything it does lives in libraries the tests link; this file only
// hands argv over.
#include "proxy/cli/cli.h"

int main(int argc, char** argv) { return sluice::cli::run(argc, argv); }
