// Generated elementwise source: structure, and that it compiles under NVRTC (no GPU needed).
#include <gtest/gtest.h>

#include "jit_test_util.hpp"
#include "tessel/core/error.hpp"
#include "tessel/jit/elementwise.hpp"
#include "tessel/jit/kernel_cache.hpp"
#include "tessel/jit/user_kernels.hpp"

namespace tessel::jit {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void expect_compiles(const ElementwiseSpec& spec) {
  if (!nvrtc_available()) return;
  CompileRequest r;
  r.source = generate_elementwise_source(spec);
  r.name = elementwise_kernel_name(spec);
  r.arch = test::kTestArch;
  try {
    const CompileResult out = compile_to_cubin(r);
    EXPECT_FALSE(out.cubin.empty());
  } catch (const CompileError& e) {
    ADD_FAILURE() << e.what() << "\n----\n" << r.source;
  }
}

ElementwiseSpec axpb(DType x, DType out) {
  ElementwiseSpec s;
  s.name = "axpb";
  s.operands = {{"z", out, true, false}, {"x", x, false, false}, {"y", x, false, false}, {"a", x, false, true}};
  s.body = "z = a * x + y;";
  return s;
}

TEST(JitElementwiseCodegen, ContiguousPathIsVectorizedGridStride) {
  ElementwiseSpec s = axpb(DType::float32, DType::float32);
  EXPECT_EQ(vector_width(s), 4);
  const std::string src = generate_elementwise_source(s);
  EXPECT_TRUE(contains(src, "extern \"C\" __global__ void axpb_c("));
  EXPECT_TRUE(contains(src, "tessel::load_vec<4>(p_x + v * 4)"));
  EXPECT_TRUE(contains(src, "tessel::store_vec<4>(p_z + v * 4, x_z)"));
  EXPECT_TRUE(contains(src, "v += step"));   // grid-stride
  EXPECT_TRUE(contains(src, "typedef long long index_t"));
  EXPECT_FALSE(contains(src, "tessel::load_vec<4>(p_z"));  // z is only written
  EXPECT_TRUE(contains(src, "float v_a"));                 // scalar by value
  expect_compiles(s);
  s.index32 = true;
  EXPECT_EQ(elementwise_kernel_name(s), "axpb_c_i32");
  EXPECT_TRUE(contains(generate_elementwise_source(s), "typedef int index_t"));
  expect_compiles(s);
}

TEST(JitElementwiseCodegen, UnrolledContiguousPathLoadsAllVectorsFirst) {
  ElementwiseSpec s = axpb(DType::float32, DType::float32);
  s.unroll = 4;
  EXPECT_EQ(elementwise_kernel_name(s), "axpb_c_u4");
  const std::string src = generate_elementwise_source(s);
  EXPECT_TRUE(contains(src, "v + 3 * step < nvec; v += 4 * step"));
  EXPECT_TRUE(contains(src, "x_x[u] = tessel::load_vec<4>(p_x + (v + u * step) * 4)"));
  EXPECT_TRUE(contains(src, "tessel::store_vec<4>(p_z + (v + u * step) * 4, x_z[u])"));
  EXPECT_TRUE(contains(src, "for (; v < nvec; v += step)"));  // the remainder, one vector a trip
  EXPECT_FALSE(contains(src, "tessel::load_vec<4>(p_z"));
  expect_compiles(s);
  s.index32 = true;
  EXPECT_EQ(elementwise_kernel_name(s), "axpb_c_i32_u4");
  expect_compiles(s);
  // complex128 has no vector path: unroll changes nothing, not even the name.
  ElementwiseSpec c = axpb(DType::complex128, DType::complex128);
  c.unroll = 4;
  EXPECT_EQ(elementwise_kernel_name(c), "axpb_c");
  c.unroll = 9;
  EXPECT_THROW(generate_elementwise_source(c), ValueError);
  // Operand names the generated loops declare are rejected, not silently shadowed.
  for (const char* name : {"u", "k", "v", "step", "n"}) {
    ElementwiseSpec r = axpb(DType::float32, DType::float32);
    r.operands[1].name = name;
    r.body = std::string("z = a * ") + name + " + y;";
    EXPECT_THROW(generate_elementwise_source(r), ValueError) << name;
  }
}

TEST(JitElementwiseCodegen, UniformInputIsLoadedOncePerThread) {
  ElementwiseSpec s = axpb(DType::float32, DType::float32);
  s.operands[2].is_uniform = true;  // y: one element for every place
  s.unroll = 2;
  EXPECT_EQ(elementwise_kernel_name(s), "axpb_c_b2_u2");
  const std::string src = generate_elementwise_source(s);
  EXPECT_TRUE(contains(src, "const float b_y = *p_y;"));
  EXPECT_TRUE(contains(src, "float y = tessel::widen(b_y);"));
  EXPECT_FALSE(contains(src, "p_y +"));  // never indexed: no vector or element loads of y
  EXPECT_FALSE(contains(src, "p_y["));
  EXPECT_TRUE(contains(src, "x_x[u] = tessel::load_vec<4>(p_x + (v + u * step) * 4)"));  // x stays vectorized
  expect_compiles(s);
  ElementwiseSpec half = axpb(DType::bfloat16, DType::float32);
  half.operands[2].is_uniform = true;
  const std::string half_src = generate_elementwise_source(half);
  EXPECT_TRUE(contains(half_src, "const __nv_bfloat16 b_y = *p_y;"));
  EXPECT_TRUE(contains(half_src, "float y = tessel::widen(b_y);"));
  expect_compiles(half);
  // Only array inputs of the contiguous layout can be uniform.
  for (int k : {0, 3}) {
    ElementwiseSpec bad = axpb(DType::float32, DType::float32);
    bad.operands[static_cast<std::size_t>(k)].is_uniform = true;
    EXPECT_THROW(generate_elementwise_source(bad), ValueError) << k;
  }
  s.layout = ElementwiseLayout::strided;
  EXPECT_THROW(generate_elementwise_source(s), ValueError);
}

TEST(JitElementwiseCodegen, TuningIsValidatedAndCountsThreads) {
  const ElementwiseTuning saved = elementwise_tuning();
  EXPECT_THROW(set_elementwise_tuning({100, 4, 8}), ValueError);
  EXPECT_THROW(set_elementwise_tuning({256, 0, 8}), ValueError);
  EXPECT_THROW(set_elementwise_tuning({256, 9, 8}), ValueError);
  EXPECT_THROW(set_elementwise_tuning({256, 4, 0}), ValueError);
  EXPECT_THROW(set_elementwise_tuning({256, 4, 65}), ValueError);
  EXPECT_EQ(elementwise_tuning(), saved);  // unchanged by the failures
  set_elementwise_tuning({128, 2, 3});
  EXPECT_EQ(elementwise_tuning(), (ElementwiseTuning{128, 2, 3}));
  set_elementwise_tuning(saved);
  EXPECT_EQ(elementwise_threads(10'000'000, true, 4, 4), 625'000);
  EXPECT_EQ(elementwise_threads(17, true, 4, 4), 2);
  EXPECT_EQ(elementwise_threads(17, false, 4, 4), 17);
  EXPECT_EQ(elementwise_threads(17, true, 1, 4), 17);
}

TEST(JitElementwiseCodegen, VectorWidthIs16BytesOfTheWidestOperand) {
  EXPECT_EQ(vector_width(axpb(DType::float16, DType::float16)), 8);
  EXPECT_EQ(vector_width(axpb(DType::float16, DType::float32)), 4);
  EXPECT_EQ(vector_width(axpb(DType::int8, DType::int8)), 16);
  EXPECT_EQ(vector_width(axpb(DType::float64, DType::float64)), 2);
  EXPECT_EQ(vector_width(axpb(DType::complex128, DType::complex128)), 1);
  const std::string src = generate_elementwise_source(axpb(DType::complex128, DType::complex128));
  EXPECT_FALSE(contains(src, "load_vec"));
}

TEST(JitElementwiseCodegen, StridedPathUsesCollapsedRank) {
  ElementwiseSpec s = axpb(DType::float32, DType::float32);
  s.layout = ElementwiseLayout::strided;
  s.rank = 3;
  const std::string src = generate_elementwise_source(s);
  EXPECT_TRUE(contains(src, "axpb_s3("));
  EXPECT_TRUE(contains(src, "tessel::Dims<3> dims"));
  EXPECT_TRUE(contains(src, "tessel::Strides<3> s_x"));
  EXPECT_TRUE(contains(src, "long long index_t"));
  EXPECT_FALSE(contains(src, "load_vec"));
  expect_compiles(s);
  s.rank = 1;
  expect_compiles(s);
  s.rank = kMaxElementwiseRank;
  s.index32 = true;
  expect_compiles(s);
  s.rank = kMaxElementwiseRank + 1;
  EXPECT_THROW(generate_elementwise_source(s), ValueError);
}

TEST(JitElementwiseCodegen, EveryDtypeCompilesBothLayouts) {
  const DType all[] = {DType::bool_,   DType::int8,    DType::int16,    DType::int32,     DType::int64,
                       DType::uint8,   DType::uint16,  DType::uint32,   DType::uint64,    DType::float16,
                       DType::bfloat16, DType::float32, DType::float64, DType::complex64, DType::complex128};
  // One kernel per dtype pair in a single program would be faster, but this checks each on its own.
  for (DType d : all) {
    ElementwiseSpec s;
    s.name = std::string("copy_") + dtype_name(d);
    s.operands = {{"out", DType::float32, true, false}, {"in", d, false, false}};
    s.body = "out = tessel::cast<float>(in);";
    SCOPED_TRACE(dtype_name(d));
    expect_compiles(s);
    ElementwiseSpec back;
    back.name = std::string("cast_to_") + dtype_name(d);
    back.operands = {{"out", d, true, false}, {"in", DType::float64, false, false}};
    back.body = "out = in;";
    back.layout = ElementwiseLayout::strided;
    back.rank = 2;
    back.body = "out = tessel::cast<" + std::string(cuda_type_name(d)) + ">(in);";
    expect_compiles(back);
  }
}

TEST(JitElementwiseCodegen, OutputsReadByTheBodyAreLoaded) {
  EXPECT_FALSE(body_reads("z = x;", "z"));
  EXPECT_TRUE(body_reads("z += x;", "z"));
  EXPECT_TRUE(body_reads("z = z * 2;", "z"));
  EXPECT_TRUE(body_reads("if (z == 1) z = 2;", "z"));
  // Outputs the body may skip keep their value, so they are loaded too.
  EXPECT_TRUE(body_reads("if (m) z = 2;", "z"));
  EXPECT_TRUE(body_reads("if (m) { z = 2; }", "z"));
  EXPECT_TRUE(body_reads("if (m) y = 1; else z = 2;", "z"));
  EXPECT_TRUE(body_reads("zz = 1; q.z = 2;", "z"));
  EXPECT_FALSE(body_reads("z = 1; if (m) z = 2;", "z"));
  EXPECT_FALSE(body_reads("long long o = 0;\n{ o += 1; }\nz = src[o];\n", "z"));
  ElementwiseSpec s = axpb(DType::float32, DType::float32);
  s.body = "z += a * x + y;";
  const std::string src = generate_elementwise_source(s);
  EXPECT_TRUE(contains(src, "tessel::load_vec<4>(p_z + v * 4)"));
  expect_compiles(s);
}

TEST(JitElementwiseCodegen, BadSpecsAreRejected) {
  ElementwiseSpec s = axpb(DType::float32, DType::float32);
  s.name = "bad name";
  EXPECT_THROW(generate_elementwise_source(s), ValueError);
  s = axpb(DType::float32, DType::float32);
  s.operands[1].name = "z";
  EXPECT_THROW(generate_elementwise_source(s), ValueError);
  s = axpb(DType::float32, DType::float32);
  s.operands[0].is_output = false;
  EXPECT_THROW(generate_elementwise_source(s), ValueError);
}

TEST(JitExpr, LoweringEmitsSharedSubtreesOnceAndComputesHalfInFloat) {
  // relu(a * x + b) * c with x float16, the rest float16; a*x+b shared by two outputs.
  const DType h = DType::float16;
  const Expr x = Expr::input(0, h), a = Expr::input(1, h), b = Expr::input(2, h), c = Expr::input(3, h);
  const Expr axb = Expr::format("({0} * {1} + {2})", {a, x, b}, h);
  const Expr relu = Expr::call("tessel::maximum", {axb, Expr::literal("0.0f", h)}, h);
  const Expr out0 = Expr::format("({0} * {1})", {relu, c}, h);
  const Expr out1 = Expr::cast(axb, DType::float32);
  const ElementwiseSpec s = lower_expressions("fused", {h, h, h, h}, {false, false, false, true}, {out0, out1},
                                              {h, DType::float32});
  EXPECT_EQ(s.operands.size(), 6u);
  EXPECT_TRUE(s.operands[5].is_scalar);
  EXPECT_EQ(s.body.find("(in1 * in0 + in2)"), s.body.rfind("(in1 * in0 + in2)"));  // once
  EXPECT_TRUE(contains(s.body, "const float t0 = (in1 * in0 + in2);"));
  EXPECT_TRUE(contains(s.body, "out0 = "));
  EXPECT_TRUE(contains(s.body, "out1 = "));
  expect_compiles(s);
  EXPECT_EQ(vector_width(s), 4);  // float32 output is the widest
}

TEST(JitExpr, LoweringChecksInputs) {
  EXPECT_THROW(lower_expressions("k", {DType::float32}, {}, {Expr::input(1, DType::float32)}, {DType::float32}),
               ValueError);
  EXPECT_THROW(lower_expressions("k", {DType::float32}, {}, {Expr::input(0, DType::int32)}, {DType::float32}),
               DTypeError);
}

TEST(JitElementwiseKernel, ParsesParamsAndGeneratesSource) {
  ElementwiseKernel k("float32 x, float32 y", "float32 z", "z = x * y + 1", "mul_add");
  ASSERT_EQ(k.spec().operands.size(), 3u);
  EXPECT_EQ(k.spec().operands[0].name, "x");
  EXPECT_TRUE(k.spec().operands[2].is_output);
  EXPECT_EQ(k.spec().body, "z = x * y + 1;");
  const std::string src = k.source();
  EXPECT_TRUE(contains(src, "mul_add_c("));
  EXPECT_TRUE(contains(src, "z = x * y + 1;"));
  ElementwiseSpec s = k.spec();
  expect_compiles(s);
  s.layout = ElementwiseLayout::strided;
  s.rank = 2;
  expect_compiles(s);
}

TEST(JitElementwiseKernel, HalfParamsKeepTheirTypes) {
  ElementwiseKernel k("float16 x, bfloat16 y", "float16 z", "z = x + __float2half(__bfloat162float(y))", "h_add");
  EXPECT_TRUE(contains(k.source(), "__half x = x_x.v[k];"));
  expect_compiles(k.spec());
}

TEST(JitElementwiseKernel, BadParamsAreClearErrors) {
  EXPECT_THROW(ElementwiseKernel("float32", "float32 z", "z = 1", "k"), ValueError);
  EXPECT_THROW(ElementwiseKernel("float99 x", "float32 z", "z = x", "k"), DTypeError);
  EXPECT_THROW(ElementwiseKernel("raw float32 x", "float32 z", "z = x[0]", "k"), ValueError);
  EXPECT_THROW(ElementwiseKernel("float32 x", "", "x = 1", "k"), ValueError);
  EXPECT_THROW(ElementwiseKernel("float32 x", "float32 x", "x = 1", "k"), ValueError);
}

TEST(JitElementwiseKernel, CompileErrorShowsTheBodyLine) {
  TESSEL_REQUIRE_NVRTC();
  ElementwiseKernel k("float32 x", "float32 z", "z = x + not_declared", "bad_body");
  CompileRequest r;
  r.source = k.source();
  r.name = elementwise_kernel_name(k.spec());
  r.arch = test::kTestArch;
  try {
    compile_to_cubin(r);
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    EXPECT_TRUE(contains(e.what(), "bad_body_c")) << e.what();
    EXPECT_TRUE(contains(e.what(), "> ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "z = x + not_declared;")) << e.what();
  }
}

}  // namespace
}  // namespace tessel::jit
