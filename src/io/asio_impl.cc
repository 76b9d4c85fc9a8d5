// Asio's and Beast's compiled parts, once for all of kvgate (their separate-compilation
// mode: BOOST_ASIO_SEPARATE_COMPILATION and BOOST_BEAST_SEPARATE_COMPILATION are set for
// every file that links kvgate_io, so those files only declare what is defined here).
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
