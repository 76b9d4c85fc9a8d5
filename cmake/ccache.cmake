# ccache wherever the build runs (make, a bare `cmake --build` or `ninja`, a git
# worktree): paths are hashed relative to the source tree, so two checkouts share hits.
# Included by the main build and the fuzz build; a launcher given on the command line wins.
find_program(KVGATE_CCACHE ccache)
if(KVGATE_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER env CCACHE_BASEDIR=${KVGATE_CCACHE_BASEDIR}
      CCACHE_NOHASHDIR=true CCACHE_SLOPPINESS=time_macros ${KVGATE_CCACHE})
endif()
