// Fixture for the layering test: only io/ (and dns/) make libuv handles; config/ holds the
// loop and uses io::Timer.
#include <uv.h>

void settleLater(uv_loop_t* loop, uv_timer_t* timer) { uv_timer_init(loop, timer); }
