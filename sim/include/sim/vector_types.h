// CUDA's built-in vector types (int2, float4, dim3, ...) with CUDA's alignments,
// and their make_* constructors, for the SIMT CPU emulator.
// Tested by tests/sim (alignment static_asserts live at the bottom of this file).
#pragma once

#define SIM_VEC1(T, N, A)                                                        \
  struct alignas(A) N##1 { T x; };                                               \
  inline constexpr N##1 make_##N##1(T x) { return N##1{x}; }
#define SIM_VEC2(T, N, A)                                                        \
  struct alignas(A) N##2 { T x, y; };                                            \
  inline constexpr N##2 make_##N##2(T x, T y) { return N##2{x, y}; }
#define SIM_VEC3(T, N, A)                                                        \
  struct alignas(A) N##3 { T x, y, z; };                                         \
  inline constexpr N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }
#define SIM_VEC4(T, N, A)                                                        \
  struct alignas(A) N##4 { T x, y, z, w; };                                      \
  inline constexpr N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }

SIM_VEC1(signed char, char, 1)  SIM_VEC2(signed char, char, 2)
SIM_VEC3(signed char, char, 1)  SIM_VEC4(signed char, char, 4)
SIM_VEC1(unsigned char, uchar, 1) SIM_VEC2(unsigned char, uchar, 2)
SIM_VEC3(unsigned char, uchar, 1) SIM_VEC4(unsigned char, uchar, 4)
SIM_VEC1(short, short, 2)  SIM_VEC2(short, short, 4)
SIM_VEC3(short, short, 2)  SIM_VEC4(short, short, 8)
SIM_VEC1(unsigned short, ushort, 2) SIM_VEC2(unsigned short, ushort, 4)
SIM_VEC3(unsigned short, ushort, 2) SIM_VEC4(unsigned short, ushort, 8)
SIM_VEC1(int, int, 4)  SIM_VEC2(int, int, 8)  SIM_VEC3(int, int, 4)  SIM_VEC4(int, int, 16)
SIM_VEC1(unsigned int, uint, 4) SIM_VEC2(unsigned int, uint, 8)
SIM_VEC3(unsigned int, uint, 4) SIM_VEC4(unsigned int, uint, 16)
SIM_VEC1(long, long, 8)  SIM_VEC2(long, long, 16)
SIM_VEC1(unsigned long, ulong, 8) SIM_VEC2(unsigned long, ulong, 16)
SIM_VEC1(long long, longlong, 8) SIM_VEC2(long long, longlong, 16)
SIM_VEC1(unsigned long long, ulonglong, 8) SIM_VEC2(unsigned long long, ulonglong, 16)
SIM_VEC1(float, float, 4)  SIM_VEC2(float, float, 8)
SIM_VEC3(float, float, 4)  SIM_VEC4(float, float, 16)
SIM_VEC1(double, double, 8) SIM_VEC2(double, double, 16) SIM_VEC3(double, double, 8)
// The 3- and 4-component 64-bit types (CUDA 13 deprecates the 4-component ones in favour
// of *_16a / *_32a; not emulated: cudaMalloc here only guarantees 16-byte alignment).
SIM_VEC3(long, long, 8)  SIM_VEC4(long, long, 16)
SIM_VEC3(unsigned long, ulong, 8) SIM_VEC4(unsigned long, ulong, 16)
SIM_VEC3(long long, longlong, 8) SIM_VEC4(long long, longlong, 16)
SIM_VEC3(unsigned long long, ulonglong, 8) SIM_VEC4(unsigned long long, ulonglong, 16)
SIM_VEC4(double, double, 16)

#undef SIM_VEC1
#undef SIM_VEC2
#undef SIM_VEC3
#undef SIM_VEC4

// dim3: like uint3, but every component defaults to 1 (CUDA's launch dimensions).
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

static_assert(alignof(float4) == 16 && sizeof(float4) == 16);
static_assert(alignof(float2) == 8 && alignof(int2) == 8 && alignof(double2) == 16);
static_assert(sizeof(float3) == 12 && alignof(float3) == 4);
static_assert(alignof(char4) == 4 && alignof(uchar4) == 4 && alignof(int4) == 16);
static_assert(alignof(double4) == 16 && sizeof(double4) == 32 && alignof(double3) == 8);
static_assert(alignof(longlong4) == 16 && alignof(ulong4) == 16 && alignof(longlong3) == 8);
