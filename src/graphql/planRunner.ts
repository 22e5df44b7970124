import { createRequire } from "node:module";
import path from "node:path";
import { PgSelectStep, SideEffectWithPgClientStep } from "@dataplan/pg";
import { __ItemStep, __ValueStep, isPromiseLike, type OperationPlan } from "grafast";
import {
  getVariableValues,
  isNonNullType,
  isScalarType,
  Kind,
  typeFromAST,
  valueFromAST,
  type GraphQLInputType,
  type GraphQLScalarType,
  type DocumentNode,
  type FragmentDefinitionNode,
  type OperationDefinitionNode,
  GraphQLBoolean,
  GraphQLFloat,
  GraphQLID,
  GraphQLInt,
  GraphQLString,
  type GraphQLLeafType,
  type GraphQLSchema,
} from "grafast/graphql";
import { isDatabaseUnavailable } from "./unavailable";

/**
 * A request's grafast plan, run without grafast's engine.
 *
 * Grafast plans an operation once (per set of values its constraints allow) and then, per request, runs that
 * plan through its general engine: buckets, phases, per-item step execution, the output plan walking the
 * buckets. For the plans most requests get — unary selects (@dataplan/pg's statement, already kept per shape),
 * a mutation field's side effect, and side-effect-free steps over their rows — the same steps can be run
 * directly: each step's own `unbatchedExecute` (a select's or side effect's own `execute`) on its
 * dependencies' values, the output written from the plan's own output plans, with grafast's own rules for
 * null and inhibited values and its leaf serialisation. Nothing here knows pg_graphql's rules or the schema's
 * shape: it reads them from the plan.
 *
 * A plan with anything else (polymorphism, streams, defer, batched asynchronous steps) is not compiled. A query
 * whose run meets anything unexpected (an error, a null where the output forbids one) gives up and the caller
 * runs it through grafast, which answers it, errors included; both read the same data, giving up after a
 * select only costs its repetition. A mutation gives up that way only before its first statement; after it,
 * see RetryOnEngine and WrittenButNotAnswered.
 */

// grafast's value flags (constants.js): the rules for null and inhibited dependencies.
const FLAG_ERROR = 1;
const FLAG_NULL = 2;
const FLAG_INHIBITED = 4;

// Four of grafast's modules its package does not export: the leaf string writers its output plans use (so
// a leaf is written byte for byte as grafast writes it), the plan cache its `execute` goes through and the
// constraints test it picks a cached plan with (so the plan run here is the one grafast would run, planned
// once for both), and its test for a value returned with flags (an error, an inhibition), which the runner
// leaves to grafast.
const requireHere = createRequire(__filename);
const grafastDir = path.dirname(requireHere.resolve("grafast"));
const { stringifyJSON, stringifyString } = requireHere(path.join(grafastDir, "tamedevilUtils.js")) as {
  stringifyJSON(value: unknown): string;
  stringifyString(value: string): string;
};
const { isFlaggedValue } = requireHere(path.join(grafastDir, "error.js")) as {
  isFlaggedValue(value: object): boolean;
};
const { matchesConstraints } = requireHere(path.join(grafastDir, "constraints.js")) as {
  matchesConstraints(constraints: unknown[], value: unknown): boolean;
};
const { establishOperationPlan } = requireHere(path.join(grafastDir, "establishOperationPlan.js")) as {
  establishOperationPlan(
    schema: GraphQLSchema,
    operation: OperationDefinitionNode,
    fragments: Record<string, FragmentDefinitionNode>,
    variableValues: Record<string, unknown>,
    context: Record<string, unknown>,
    rootValue: unknown,
    onError: "PROPAGATE",
    options: Record<string, unknown>,
  ): OperationPlan;
};

/** A step as the runner reads it (grafast keeps these public at run time, not in its types). */
interface PlanStep {
  id: number;
  layerPlan: PlanLayer;
  dependencies: readonly PlanStep[];
  dependencyForbiddenFlags: readonly number[];
  dependencyOnReject: readonly unknown[];
  isSyncAndSafe: boolean;
  hasSideEffects: boolean;
  metaKey: number | string | symbol | undefined;
  _isUnary: boolean;
  unbatchedExecute?: (extra: unknown, ...values: unknown[]) => unknown;
}

interface PlanLayer {
  id: number;
  reason: {
    type: string;
    parentStep?: PlanStep;
    stream?: unknown;
    parentLayerPlan?: PlanLayer;
    mutationIndex?: number;
  };
}

function parentOf(layer: PlanLayer): PlanLayer | null {
  return layer.reason.parentLayerPlan ?? null;
}

interface OutputNode {
  rootStep: PlanStep;
  layerPlan: PlanLayer;
  sideEffectStep: PlanStep | null;
  processRoot: unknown;
  deferredOutputPlans: readonly unknown[];
  type: { mode: string; typeName?: string; graphqlType?: GraphQLLeafType };
  keys: Record<
    string,
    { type: "__typename" } | { type: "outputPlan"; outputPlan: OutputNode; isNonNull: boolean }
  >;
  child: OutputNode | null;
  childIsNonNull: boolean;
}

/** Why a plan or a run is not for the runner; internal, never reaches a client. */
class NotRunnable extends Error {}

/** A step's value when grafast would not run it (a dependency it forbids was null or inhibited). */
const INHIBITED = Symbol("inhibited");
/** A frame slot not computed yet. */
const UNSET = Symbol("unset");

const SUPPORTED_LAYERS = new Set(["root", "mutationField", "listItem", "nullableBoundary"]);

/**
 * A mutation's run gave up after its statements went out and one failed: the request's transaction must be
 * rolled back and the request run again through grafast (which answers the failure in its own words).
 */
export class RetryOnEngine extends Error {}

/**
 * A mutation's statements all succeeded (and may be committed) but its answer could not be written exactly as
 * grafast writes it: the request cannot be run again; the caller answers it with an error.
 */
export class WrittenButNotAnswered extends Error {}

/** The values of one instance of a layer (the root, a mutation field, one list item, one non-null boundary). */
class Frame {
  readonly values: unknown[];
  /**
   * On the root frame: the frames of the layers that hold asynchronous steps besides the root's (mutation
   * fields' layers, and non-null boundaries under them), made as those steps run. Null on every other frame.
   */
  readonly unaryFrames: Map<PlanLayer, Frame> | null;
  constructor(
    readonly layer: PlanLayer,
    readonly parent: Frame | null,
    readonly item: unknown,
    slots: number,
    /** Per request: the meta objects of steps that keep some (grafast's metaByMetaKey). */
    readonly meta: Record<string, Record<string, unknown>>,
  ) {
    this.values = unsetValues(slots);
    this.unaryFrames = parent === null ? new Map() : null;
  }
}

/** Per slot count, a list of that many UNSET values (packed): a frame's values are a copy of it. */
const unsetLists: unknown[][] = [];

function unsetValues(slots: number): unknown[] {
  let list = unsetLists[slots];
  if (list === undefined) {
    list = [];
    for (let i = 0; i < slots; i++) list.push(UNSET);
    unsetLists[slots] = list;
  }
  return list.slice();
}

/** A step's value in a frame (computed once per frame of its layer). */
type Getter = (frame: Frame) => unknown;
/** An output node's JSON text in a frame of the layer its parent output node is written in. */
type Writer = (frame: Frame) => string;

/** A value as grafast's unary execution values present it to a step's `execute`. */
function unaryValue(value: unknown): unknown {
  const flags = value == null ? FLAG_NULL : 0;
  return {
    isBatch: false,
    value,
    at: () => value,
    unaryValue: () => value,
    _flagsAt: () => flags,
    _getStateUnion: () => flags,
  };
}

function isFlagged(value: unknown): boolean {
  return typeof value === "object" && value !== null && (value instanceof Error || isFlaggedValue(value));
}

function rootOf(frame: Frame): Frame {
  let f = frame;
  while (f.parent) f = f.parent;
  return f;
}

function frameOf(layer: PlanLayer, frame: Frame): Frame {
  for (let f: Frame | null = frame; f; f = f.parent) if (f.layer === layer) return f;
  throw new NotRunnable("frame");
}

/** A compiled plan: its steps as getters and its output plan as writers, checked once. */
export interface RunnablePlan {
  schema: GraphQLSchema;
  plan: OperationPlan;
  /** The root layer's selects, each after those it depends on, with those. */
  rootSteps: AsyncStep[];
  /** The mutation fields' layers in the document's order, each with its asynchronous steps in order. */
  mutationFields: { layer: PlanLayer; slots: () => number; steps: AsyncStep[] }[];
  /** A unary layer's frame in this request (made on first use; null under a boundary whose value is null). */
  unaryFrame: (layer: PlanLayer, root: Frame) => Frame | null;
  rootSlots: number;
  metaKeys: string[];
  write: Writer;
  /** The variables', context's and root value's slots in the root frame. */
  inputSlots: { variables: number; context: number; rootValue: number };
}

interface AsyncStep {
  step: PlanStep;
  slot: number;
  layer: PlanLayer;
  after: PlanStep[];
  run: (frame: Frame) => Promise<unknown>;
}

/** Builds a plan's getters and writers; throws NotRunnable at the first thing the runner does not do. */
class PlanCompiler {
  private readonly getters = new Map<number, Getter>();
  private readonly slots = new Map<number, number>();
  private readonly slotCounts = new Map<PlanLayer, number>();
  /** Per step, the asynchronous steps it depends on, directly or not (itself included when it is one). */
  private readonly upstreamAsync = new Map<number, PlanStep[]>();
  readonly asyncSteps: Omit<AsyncStep, "run">[] = [];
  readonly metaKeys = new Set<string>();
  private readonly p: {
    variableValuesStep: PlanStep;
    contextStep: PlanStep;
    rootValueStep: PlanStep;
    rootLayerPlan: PlanLayer;
  };

  constructor(readonly plan: OperationPlan) {
    this.p = plan as never;
  }

  slotCount(layer: PlanLayer): number {
    return this.slotCounts.get(layer) ?? 0;
  }

  /** A layer's slot count once compiling is over (frames are made only then). */
  finalSlotCount(layer: PlanLayer): () => number {
    let count = -1;
    return () => (count < 0 ? (count = this.slotCount(layer)) : count);
  }

  /** The mutation fields' layers the plan's steps and output live in. */
  readonly mutationLayers = new Set<PlanLayer>();

  slotOf(step: PlanStep): number {
    let slot = this.slots.get(step.id);
    if (slot === undefined) {
      checkLayer(step.layerPlan);
      if (step.layerPlan.reason.type === "mutationField") this.mutationLayers.add(step.layerPlan);
      slot = this.slotCount(step.layerPlan);
      this.slotCounts.set(step.layerPlan, slot + 1);
      this.slots.set(step.id, slot);
    }
    return slot;
  }

  /** The asynchronous steps (selects, side effects) a step depends on, directly or not. */
  asyncStepsUnder(step: PlanStep): PlanStep[] {
    this.getter(step);
    return this.upstreamAsync.get(step.id)!;
  }

  getter(step: PlanStep): Getter {
    const known = this.getters.get(step.id);
    if (known) return known;
    const layer = step.layerPlan;
    const slot = this.slotOf(step);
    const upstream = new Set<PlanStep>();
    for (const dep of step.dependencies) for (const s of this.asyncStepsUnder(dep)) upstream.add(s);
    // grafast runs a step after its layer's side effect (a mutation field's) even without a dependency on it.
    const implicit = (step as { implicitSideEffectStep?: PlanStep | null }).implicitSideEffectStep;
    if (implicit) for (const s of this.asyncStepsUnder(implicit)) upstream.add(s);
    this.upstreamAsync.set(step.id, [...upstream]);
    let getter: Getter;
    const { p } = this;
    if (step === p.variableValuesStep || step === p.contextStep || step === p.rootValueStep) {
      // Set in the root frame before the run.
      getter = (frame) => frameOf(layer, frame).values[slot];
    } else if (step instanceof __ValueStep) {
      throw new NotRunnable("tracked value");
    } else if (step instanceof __ItemStep) {
      const item = step as unknown as { depth: number; transformStepId?: number | null };
      const reason = layer.reason;
      if (item.depth !== 0 || item.transformStepId != null) throw new NotRunnable("nested item");
      if (reason.type !== "listItem" || reason.stream || reason.parentStep !== step.dependencies[0]) {
        throw new NotRunnable("item layer");
      }
      getter = (frame) => frameOf(layer, frame).item;
    } else if (step instanceof PgSelectStep || step instanceof SideEffectWithPgClientStep) {
      const sideEffect = step instanceof SideEffectWithPgClientStep;
      if (!isUnaryLayer(layer) || !step._isUnary || (sideEffect && layer.reason.type !== "mutationField")) {
        throw new NotRunnable("batched step");
      }
      if (!sideEffect && (step as PgSelectStep).mode === "mutation") throw new NotRunnable("select mode");
      this.asyncSteps.push({ step, slot, layer, after: [...upstream] });
      this.upstreamAsync.set(step.id, [...upstream, step]);
      // Run (and set) before anything is written.
      getter = (frame) => {
        const v = frameOf(layer, frame).values[slot];
        if (v === UNSET) throw new NotRunnable("step not run");
        return v;
      };
    } else {
      getter = this.syncGetter(step, slot);
    }
    this.getters.set(step.id, getter);
    return getter;
  }

  /** A side-effect-free step: its own unbatchedExecute on its dependencies' values. */
  private syncGetter(step: PlanStep, slot: number): Getter {
    // Not only grafast's "sync and safe" steps: a step that may throw or return a promise (a lambda) runs
    // here too, and the run gives up when it does either.
    if (step.hasSideEffects || typeof step.unbatchedExecute !== "function") {
      throw new NotRunnable("step");
    }
    // A step that accepts errors or inhibited values (a trap) sees flags the runner does not keep.
    const kept = FLAG_ERROR | FLAG_INHIBITED;
    if (step.dependencyForbiddenFlags.some((f) => (f & kept) !== kept)) throw new NotRunnable("trap");
    if (step.dependencyOnReject.some((r) => r !== undefined)) throw new NotRunnable("onReject");
    const layer = step.layerPlan;
    const execute = step.unbatchedExecute.bind(step);
    const deps = step.dependencies.map((d) => this.getter(d));
    const nullForbidden = step.dependencyForbiddenFlags.map((f) => (f & FLAG_NULL) !== 0);
    const metaKey = step.metaKey;
    if (metaKey !== undefined) this.metaKeys.add(metaKey as string);
    const plainExtra = { stopTime: null, meta: undefined, eventEmitter: undefined, stream: null };
    const extraOf = (frame: Frame) =>
      metaKey === undefined ? plainExtra : { ...plainExtra, meta: frame.meta[metaKey as string] };
    const checked = (result: unknown) => {
      if (isFlagged(result) || isPromiseLike(result)) throw new NotRunnable("flagged");
      return result;
    };
    if (deps.length === 1) {
      const [dep] = deps;
      const [forbidsNull] = nullForbidden;
      return (frame) => {
        const own = frameOf(layer, frame);
        const cached = own.values[slot];
        if (cached !== UNSET) return cached;
        const v = dep(own);
        // A dependency grafast would not hand over (null where forbidden, inhibited) inhibits the step.
        const result =
          v === INHIBITED || (v == null && forbidsNull) ? INHIBITED : checked(execute(extraOf(own), v));
        own.values[slot] = result;
        return result;
      };
    }
    return (frame) => {
      const own = frameOf(layer, frame);
      const cached = own.values[slot];
      if (cached !== UNSET) return cached;
      const args: unknown[] = [extraOf(own)];
      let result: unknown = UNSET;
      for (let i = 0; i < deps.length; i++) {
        const v = deps[i](own);
        if (v === INHIBITED || (v == null && nullForbidden[i])) {
          result = INHIBITED;
          break;
        }
        args.push(v);
      }
      if (result === UNSET) result = checked(execute(...(args as [unknown])));
      own.values[slot] = result;
      return result;
    };
  }

  /** The writer of `node`, written in frames of `current` (its parent output node's layer). */
  writer(node: OutputNode, current: PlanLayer, nonNull: boolean): Writer {
    if (node.sideEffectStep || node.processRoot || node.deferredOutputPlans.length)
      throw new NotRunnable("output");
    checkLayer(node.layerPlan);
    const nullText = (): string => {
      // grafast answers a null in a non-null position with an error: its own path says which.
      if (nonNull) throw new NotRunnable("null");
      return "null";
    };
    const enter = this.entry(node.layerPlan, current);
    const mode = node.type.mode;
    if (mode === "null") return nullText;
    if (mode === "root" || mode === "object") {
      const root = mode === "object" ? this.getter(node.rootStep) : null;
      const parts = Object.entries(node.keys).map(([key, spec], i) => {
        const prefix = `${i === 0 ? "{" : ","}"${key}":`;
        if (spec.type === "__typename") {
          const text = `${prefix}"${node.type.typeName}"`;
          return () => text;
        }
        const child = this.writer(spec.outputPlan, node.layerPlan, spec.isNonNull);
        return (frame: Frame) => prefix + child(frame);
      });
      const empty = parts.length === 0 ? "{}" : "}";
      return (outer) => {
        const frame = enter(outer);
        if (frame === null) return nullText();
        if (root !== null) {
          const v = root(frame);
          if (v == null || v === INHIBITED) return nullText();
        }
        let out = "";
        for (const part of parts) out += part(frame);
        return out + (parts.length === 0 ? empty : "}");
      };
    }
    if (mode === "array") {
      if (!node.child) throw new NotRunnable("array");
      const list = this.getter(node.rootStep);
      const itemLayer = listItemLayer(node.child.layerPlan, node.rootStep);
      const itemSlots = this.finalSlotCount(itemLayer);
      const child = this.writer(node.child, itemLayer, node.childIsNonNull);
      return (outer) => {
        const frame = enter(outer);
        if (frame === null) return nullText();
        const items = list(frame);
        if (items == null || items === INHIBITED) return nullText();
        if (!Array.isArray(items)) throw new NotRunnable("list");
        const slots = itemSlots();
        let out = "[";
        for (let i = 0; i < items.length; i++) {
          if (i > 0) out += ",";
          out += child(new Frame(itemLayer, frame, items[i], slots, frame.meta));
        }
        return `${out}]`;
      };
    }
    if (mode === "leaf") {
      const value = this.getter(node.rootStep);
      const leaf = leafWriter(node.type.graphqlType!);
      return (outer) => {
        const frame = enter(outer);
        if (frame === null) return nullText();
        const v = value(frame);
        return v == null || v === INHIBITED ? nullText() : leaf(v);
      };
    }
    throw new NotRunnable(`output mode ${mode}`);
  }

  /**
   * How a writer finds its node's frame from its parent's: the same frame, or through non-null
   * boundaries (a nullable field's layer), each entered only when its parent step's value is not null.
   */
  private entry(layer: PlanLayer, current: PlanLayer): (frame: Frame) => Frame | null {
    if (layer === current) return (frame) => frame;
    if (layer.reason.type === "mutationField" && parentOf(layer) === current) {
      this.mutationLayers.add(layer);
      return (root) => {
        const frame = root.unaryFrames!.get(layer);
        if (!frame) throw new NotRunnable("mutation frame");
        return frame;
      };
    }
    const parentLayer = parentOf(layer);
    if (layer.reason.type !== "nullableBoundary" || !parentLayer) throw new NotRunnable("enter");
    const enterParent = this.entry(parentLayer, current);
    const parentValue = this.getter(layer.reason.parentStep!);
    const slots = this.finalSlotCount(layer);
    return (outer) => {
      const parent = enterParent(outer);
      if (parent === null) return null;
      // Made already when asynchronous steps of the layer ran (see runPlan).
      const made = rootOf(parent).unaryFrames!.get(layer);
      if (made !== undefined && made.parent === parent) return made;
      const v = parentValue(parent);
      return v == null || v === INHIBITED ? null : new Frame(layer, parent, undefined, slots(), parent.meta);
    };
  }

  /** Runs a unary select or side effect through its own `execute`, as grafast runs a unary step. */
  asyncRunner(step: PlanStep): (frame: Frame) => Promise<unknown> {
    const deps = step.dependencies.map((d) => this.getter(d));
    const nullForbidden = step.dependencyForbiddenFlags.map((f) => (f & FLAG_NULL) !== 0);
    if (step.dependencyOnReject.some((r) => r !== undefined)) throw new NotRunnable("onReject");
    const unary = step as unknown as PgSelectStep;
    return async (frame) => {
      const values: unknown[] = [];
      for (let i = 0; i < deps.length; i++) {
        const v = deps[i](frame);
        if (v === INHIBITED || (v == null && nullForbidden[i])) return INHIBITED;
        values.push(unaryValue(v));
      }
      const details = {
        count: 1,
        values,
        indexMap: <T>(fn: (i: number) => T) => [fn(0)],
        indexForEach: (fn: (i: number) => void) => fn(0),
        extra: { stopTime: null, meta: undefined, eventEmitter: undefined, stream: null },
        stream: null,
      };
      const results = (await unary.execute(details as never)) as unknown[];
      const result = isPromiseLike(results[0]) ? await results[0] : results[0];
      if (isFlagged(result)) throw new NotRunnable("flagged");
      return result;
    };
  }
}

/** A layer with one instance per request: the root, a mutation field's, a non-null boundary under them. */
function isUnaryLayer(layer: PlanLayer): boolean {
  for (let l: PlanLayer | null = layer; l; l = parentOf(l)) {
    if (l.reason.type === "root" || l.reason.type === "mutationField") return true;
    if (l.reason.type !== "nullableBoundary") return false;
  }
  return false;
}

/** The mutation field's layer a unary layer is in, or the root's. */
function fieldLayerOf(layer: PlanLayer): PlanLayer {
  let l = layer;
  while (l.reason.type === "nullableBoundary") l = parentOf(l)!;
  return l;
}

function checkLayer(layer: PlanLayer): void {
  for (let l: PlanLayer | null = layer; l; l = parentOf(l)) {
    if (!SUPPORTED_LAYERS.has(l.reason.type) || l.reason.stream) throw new NotRunnable("layer");
  }
}

function listItemLayer(layer: PlanLayer, listStep: PlanStep): PlanLayer {
  for (let l: PlanLayer | null = layer; l; l = parentOf(l)) {
    if (l.reason.type === "listItem" && l.reason.parentStep === listStep) return l;
  }
  throw new NotRunnable("list layer");
}

/** A leaf as grafast's output plan writes it in string mode (its per-scalar writers). */
function leafWriter(type: GraphQLLeafType): (value: unknown) => string {
  const serialize = type.serialize.bind(type);
  if (type.serialize === GraphQLString.serialize || type.serialize === GraphQLID.serialize) {
    return (v) => stringifyString(typeof v === "string" ? v : (serialize(v) as string));
  }
  if (type.serialize === GraphQLInt.serialize) {
    return (v) => ((v as number | 0) === v ? `${v}` : `${serialize(v) as number}`);
  }
  if (type.serialize === GraphQLFloat.serialize) {
    return (v) => (Number.isFinite(v) ? `${v as number}` : String(serialize(v)));
  }
  if (type.serialize === GraphQLBoolean.serialize) {
    return (v) => (v === true || v === false ? `${v}` : serialize(v) === true ? "true" : "false");
  }
  return (v) => stringifyJSON(serialize(v));
}

/** Checks an operation plan once: a plan the runner can run exactly as grafast would, or null. */
export function runnablePlan(schema: GraphQLSchema, plan: OperationPlan): RunnablePlan | null {
  const p = plan as unknown as {
    operation: { operation: string };
    rootOutputPlan: OutputNode;
    rootLayerPlan: PlanLayer;
    variableValuesStep: PlanStep;
    contextStep: PlanStep;
    rootValueStep: PlanStep;
  };
  if (p.operation.operation !== "query" && p.operation.operation !== "mutation") return null;
  try {
    const compiler = new PlanCompiler(plan);
    const inputSlots = {
      variables: compiler.slotOf(p.variableValuesStep),
      context: compiler.slotOf(p.contextStep),
      rootValue: compiler.slotOf(p.rootValueStep),
    };
    if (p.rootOutputPlan.type.mode !== "root") return null;
    const write = compiler.writer(p.rootOutputPlan, p.rootLayerPlan, false);
    const asyncSteps = compiler.asyncSteps.map((s) => ({ ...s, run: compiler.asyncRunner(s.step) }));
    const rootSteps = asyncSteps.filter((s) => s.layer === p.rootLayerPlan);
    // Only the root's and the mutation fields' (and their boundaries') asynchronous steps run before writing.
    if (asyncSteps.some((s) => s.layer !== p.rootLayerPlan && fieldLayerOf(s.layer) === p.rootLayerPlan)) {
      return null;
    }
    const mutationFields = [...compiler.mutationLayers]
      .sort((a, b) => (a.reason.mutationIndex ?? 0) - (b.reason.mutationIndex ?? 0))
      .map((layer) => ({
        layer,
        slots: compiler.finalSlotCount(layer),
        steps: asyncSteps.filter((s) => s.layer !== p.rootLayerPlan && fieldLayerOf(s.layer) === layer),
      }));
    const unaryFrame = (layer: PlanLayer, root: Frame): Frame | null => {
      if (layer === p.rootLayerPlan) return root;
      const made = root.unaryFrames!.get(layer);
      if (made !== undefined) return made;
      if (layer.reason.type !== "nullableBoundary") throw new NotRunnable("unary frame");
      const parent = unaryFrame(parentOf(layer)!, root);
      if (parent === null) return null;
      const v = compiler.getter(layer.reason.parentStep!)(parent);
      if (v == null || v === INHIBITED) return null;
      const frame = new Frame(layer, parent, undefined, compiler.slotCount(layer), root.meta);
      root.unaryFrames!.set(layer, frame);
      return frame;
    };
    return {
      unaryFrame,
      mutationFields,
      schema,
      plan,
      rootSteps,
      rootSlots: compiler.slotCount(p.rootLayerPlan),
      metaKeys: [...compiler.metaKeys],
      write,
      inputSlots,
    };
  } catch (e) {
    if (e instanceof NotRunnable) return null;
    throw e;
  }
}

/**
 * Runs a compiled plan for one request: the `data` JSON text grafast would write, or null when the run
 * meets something it does not answer exactly before anything was written (the caller then runs the request
 * through grafast). A mutation's run that fails once its statements went out throws RetryOnEngine or
 * WrittenButNotAnswered (see them).
 */
async function runPlan(
  compiled: RunnablePlan,
  variableValues: Record<string, unknown>,
  context: Record<string, unknown>,
): Promise<string | null> {
  const meta: Record<string, Record<string, unknown>> = Object.create(null);
  for (const key of compiled.metaKeys) meta[key] = Object.create(null);
  const p = compiled.plan as unknown as { rootLayerPlan: PlanLayer };
  const root = new Frame(p.rootLayerPlan, null, undefined, compiled.rootSlots, meta);
  root.values[compiled.inputSlots.variables] = variableValues;
  root.values[compiled.inputSlots.context] = context;
  root.values[compiled.inputSlots.rootValue] = undefined;
  let wrote = false;
  try {
    const done = new Set<PlanStep>();
    // The root layer's selects first; independent ones go out together (a request's reads share a round trip).
    let pending = compiled.rootSteps;
    while (pending.length) {
      const ready = pending.filter((s) => s.after.every((d) => done.has(d)));
      if (!ready.length) return null;
      const results = await Promise.all(ready.map((s) => s.run(root)));
      ready.forEach((s, i) => {
        root.values[s.slot] = results[i];
        done.add(s.step);
      });
      pending = pending.filter((s) => !done.has(s.step));
    }
    // Then each mutation field in the document's order, one step at a time, as grafast runs them.
    for (const { layer, slots, steps } of compiled.mutationFields) {
      root.unaryFrames!.set(layer, new Frame(layer, root, undefined, slots(), meta));
      for (const s of steps) {
        const frame = compiled.unaryFrame(s.layer, root);
        // A step under a boundary whose value is null does not run (its output is null), nor do its dependents.
        if (frame === null) {
          done.add(s.step);
          continue;
        }
        // Thrown, not answered with null: after a side effect the request must not go to the engine as it is.
        if (!s.after.every((d) => done.has(d))) throw new NotRunnable("order");
        if (s.step.hasSideEffects) wrote = true;
        frame.values[s.slot] = await s.run(frame);
        done.add(s.step);
      }
    }
  } catch (e) {
    // The database out of reach: grafast's engine would only meet it again (the request answers 503).
    if (isDatabaseUnavailable(e)) throw e;
    // NotRunnable, or a step or statement that failed: grafast reports it in its own way.
    if (wrote) throw new RetryOnEngine("a mutation's statement failed", { cause: e });
    return null;
  }
  try {
    return compiled.write(root);
  } catch (e) {
    if (wrote) throw new WrittenButNotAnswered("a mutation's answer could not be written", { cause: e });
    return null;
  }
}

type Coerced = { coerced: Record<string, unknown>; errors?: undefined } | { errors: readonly unknown[] };
type ScalarCoercer = (inputs: Record<string, unknown>) => Record<string, unknown> | null;

/** Per operation, its variables' coercion when every one is a scalar (null: graphql-js's own, every time). */
const scalarCoercers = new WeakMap<OperationDefinitionNode, ScalarCoercer | null>();

/**
 * graphql-js's coercion of an operation's variables (what grafast's execution does), with the common case
 * compiled once per operation: when every variable is a scalar, each value goes through its scalar's
 * `parseValue` as graphql-js would send it; anything unusual (a missing non-null value, a value the scalar
 * refuses) goes to graphql-js, which says why.
 */
function coerceVariables(
  schema: GraphQLSchema,
  operation: OperationDefinitionNode,
  inputs: Record<string, unknown>,
): Coerced {
  let coercer = scalarCoercers.get(operation);
  if (coercer === undefined) scalarCoercers.set(operation, (coercer = scalarCoercer(schema, operation)));
  const fast = coercer?.(inputs);
  if (fast) return { coerced: fast };
  return getVariableValues(schema, operation.variableDefinitions ?? [], inputs, { maxErrors: 50 });
}

function scalarCoercer(schema: GraphQLSchema, operation: OperationDefinitionNode): ScalarCoercer | null {
  const variables: {
    name: string;
    scalar: GraphQLScalarType;
    nonNull: boolean;
    fallback?: { value: unknown };
  }[] = [];
  for (const definition of operation.variableDefinitions ?? []) {
    const type = typeFromAST(schema, definition.type as never);
    const named = isNonNullType(type) ? type.ofType : type;
    if (!isScalarType(named)) return null;
    let fallback: { value: unknown } | undefined;
    if (definition.defaultValue) {
      const value = valueFromAST(definition.defaultValue, type as GraphQLInputType);
      if (value === undefined) return null;
      fallback = { value };
    }
    variables.push({
      name: definition.variable.name.value,
      scalar: named,
      nonNull: isNonNullType(type),
      fallback,
    });
  }
  return (inputs) => {
    // A null prototype, as graphql-js makes it: a variable named like an Object method is not inherited.
    const coerced: Record<string, unknown> = Object.create(null);
    for (const { name, scalar, nonNull, fallback } of variables) {
      if (!Object.hasOwn(inputs, name)) {
        if (fallback) coerced[name] = fallback.value;
        else if (nonNull) return null;
        continue;
      }
      const value = inputs[name];
      if (value === null) {
        if (nonNull) return null;
        coerced[name] = null;
        continue;
      }
      let parsed: unknown;
      try {
        parsed = scalar.parseValue(value);
      } catch {
        return null;
      }
      if (parsed === undefined) return null;
      coerced[name] = parsed;
    }
    return coerced;
  };
}

/** The operation a request runs, and the document's fragments, as graphql-js's execution picks them. */
function operationOf(
  document: DocumentNode,
  operationName: string | undefined,
): { operation: OperationDefinitionNode; fragments: Record<string, FragmentDefinitionNode> } | null {
  let operation: OperationDefinitionNode | undefined;
  const fragments: Record<string, FragmentDefinitionNode> = Object.create(null);
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments[definition.name.value] = definition;
    else if (definition.kind === Kind.OPERATION_DEFINITION) {
      if (operationName == null) {
        if (operation) return null;
        operation = definition;
      } else if (definition.name?.value === operationName) operation = definition;
    }
  }
  return operation ? { operation, fragments } : null;
}

interface Compiled {
  schema: GraphQLSchema;
  plan: OperationPlan;
  runnable: RunnablePlan | null;
  /** Runs given up after the statements went out: a plan that keeps giving up is left to grafast. */
  misses: number;
  hits: number;
}

/** Per operation, the plans grafast made for it (one per set of values its constraints allow). */
const compiledByOperation = new WeakMap<OperationDefinitionNode, Compiled[]>();
const MAX_PLANS_PER_OPERATION = 8;
const MAX_MISSES = 8;

/** How many requests the runner answered and left to grafast (after running their plan, or before). */
export const planRunnerCounts = { answered: 0, gaveUp: 0, notRunnable: 0 };

interface PlanConstraints {
  variableValuesConstraints: unknown[];
  contextConstraints: unknown[];
  rootValueConstraints: unknown[];
}

/** Whether grafast would run `plan` for these values (the constraints its planning recorded). */
function planFits(plan: OperationPlan, variableValues: unknown, context: unknown): boolean {
  const c = plan as unknown as PlanConstraints;
  return (
    matchesConstraints(c.variableValuesConstraints, variableValues) &&
    matchesConstraints(c.contextConstraints, context) &&
    matchesConstraints(c.rootValueConstraints, undefined)
  );
}

export interface EngineFreeRequest {
  schema: GraphQLSchema;
  document: DocumentNode;
  operationName: string | undefined;
  variables: Record<string, unknown> | undefined;
  /** The request's grafast context, as the preset's `grafast.context` makes it. */
  context: Record<string, unknown>;
  /** The preset's grafast options (explain, timeouts, planning depth). */
  options: { explain?: unknown; timeouts?: unknown; maxPlanningDepth?: unknown } | undefined;
}

/**
 * Answers a request from its grafast plan without grafast's engine: the `data` JSON text, or null when the
 * request is for grafast (a subscription, variables that do not coerce, a plan or a run the runner does not
 * answer exactly), with nothing written. The plan comes from grafast's own plan cache; it is checked once per
 * plan. A mutation's context must hold the mutation-aware clients (`withMutationAwareClients`); its run may
 * throw RetryOnEngine or WrittenButNotAnswered (see runPlan).
 */
export async function runWithoutEngine(request: EngineFreeRequest): Promise<string | null> {
  const { schema, options } = request;
  // Explain output is written by grafast's engine.
  if (options?.explain) return null;
  const selected = operationOf(request.document, request.operationName);
  if (!selected || selected.operation.operation === "subscription") return null;
  const { operation, fragments } = selected;
  const coerced = coerceVariables(schema, operation, request.variables ?? {});
  if (coerced.errors) return null;
  let known = compiledByOperation.get(operation);
  if (known === undefined || known[0]?.schema !== schema) compiledByOperation.set(operation, (known = []));
  let compiled = known.find((c) => planFits(c.plan, coerced.coerced, request.context));
  if (compiled === undefined) {
    let plan: OperationPlan;
    try {
      // grafast's own plan cache: the plan its engine would run for these values.
      plan = establishOperationPlan(
        schema,
        operation,
        fragments,
        coerced.coerced,
        request.context,
        undefined,
        "PROPAGATE",
        {
          explain: options?.explain,
          timeouts: options?.timeouts,
          maxPlanningDepth: options?.maxPlanningDepth,
          outputDataAsString: true,
        },
      );
    } catch {
      // A document grafast cannot plan: its own path reports why.
      return null;
    }
    compiled = { schema, plan, runnable: runnablePlan(schema, plan), misses: 0, hits: 0 };
    known.unshift(compiled);
    if (known.length > MAX_PLANS_PER_OPERATION) known.pop();
  }
  if (compiled.runnable === null) {
    planRunnerCounts.notRunnable++;
    return null;
  }
  let data: string | null = null;
  try {
    data = await runPlan(compiled.runnable, coerced.coerced, request.context);
    return data;
  } finally {
    if (data !== null) {
      planRunnerCounts.answered++;
      compiled.hits++;
    } else {
      planRunnerCounts.gaveUp++;
      if (++compiled.misses >= MAX_MISSES && compiled.misses > compiled.hits) compiled.runnable = null;
    }
  }
}
