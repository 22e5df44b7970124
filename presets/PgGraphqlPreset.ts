import { defaultPreset as graphileBuildPreset } from "graphile-build";
import { defaultPreset as graphileBuildPgPreset } from "graphile-build-pg";
import { PgGqlDirectivesPlugin } from "../plugins/PgGqlDirectivesPlugin";
import { PgGqlInflectionPlugin } from "../plugins/PgGqlInflectionPlugin";
import { PgGqlExposurePlugin } from "../plugins/PgGqlExposurePlugin";
import { PgGqlFilterPlugin } from "../plugins/PgGqlFilterPlugin";
import { PgGqlOrderByPlugin } from "../plugins/PgGqlOrderByPlugin";
import { PgGqlConnectionPlugin } from "../plugins/PgGqlConnectionPlugin";
import { PgGqlNodePlugin } from "../plugins/PgGqlNodePlugin";
import { PgGqlIntrospectionPlugin } from "../plugins/PgGqlIntrospectionPlugin";
import { PgGqlScalarsPlugin } from "../plugins/PgGqlScalarsPlugin";
import { PgGqlViewKeysPlugin } from "../plugins/PgGqlViewKeysPlugin";
import { PgGqlRelationsPlugin } from "../plugins/PgGqlRelationsPlugin";
import { PgGqlFunctionsPlugin } from "../plugins/PgGqlFunctionsPlugin";
import { PgGqlDescriptionsPlugin } from "../plugins/PgGqlDescriptionsPlugin";
import { PgGqlAggregatesPlugin } from "../plugins/PgGqlAggregatesPlugin";
import { PgGqlMutationsPlugin } from "../plugins/PgGqlMutationsPlugin";
import { PG_GQL_LIMITS, PgGqlLimitsPlugin, planningDepthFor } from "../plugins/PgGqlLimitsPlugin";
import { PgGqlDocumentPlugin } from "../plugins/PgGqlDocumentPlugin";
import { PgGqlErrorsPlugin } from "../plugins/PgGqlErrorsPlugin";
import { PgGqlTransactionPlugin } from "../plugins/PgGqlTransactionPlugin";

/**
 * The pg_graphql shape as a Graphile preset: `extends: [PgGraphqlPreset]` in any PostGraphile v5 app.
 * Keeps graphile-build-pg's gather phase (codecs, resources, relations, RBAC) and replaces the schema
 * shape with one plugin per pg_graphql concern (plugins/, see plugins/README.md); how a request is read,
 * answered and run in one transaction are grafast middleware of its plugins (document, errors, transaction),
 * listed in the order they wrap a request.
 */
export const PgGraphqlPreset: GraphileConfig.Preset = {
  extends: [graphileBuildPreset, graphileBuildPgPreset],
  plugins: [
    PgGqlDirectivesPlugin,
    PgGqlViewKeysPlugin,
    PgGqlInflectionPlugin,
    PgGqlExposurePlugin,
    PgGqlScalarsPlugin,
    PgGqlNodePlugin,
    PgGqlFilterPlugin,
    PgGqlOrderByPlugin,
    PgGqlConnectionPlugin,
    PgGqlAggregatesPlugin,
    PgGqlRelationsPlugin,
    PgGqlFunctionsPlugin,
    PgGqlMutationsPlugin,
    PgGqlIntrospectionPlugin,
    PgGqlDescriptionsPlugin,
    PgGqlLimitsPlugin,
    PgGqlDocumentPlugin,
    PgGqlErrorsPlugin,
    PgGqlTransactionPlugin,
  ],
  disablePlugins: [
    // pg_graphql exposes relations, filters and ordering whether or not an index backs them.
    "PgIndexBehaviorsPlugin",
    // Schema-only plugins whose pg_graphql counterparts live in plugins/.
    "PgConditionArgumentPlugin",
    "PgConditionCustomFieldsPlugin",
    "PgConnectionArgOrderByPlugin",
    "PgConnectionArgOrderByDefaultValuePlugin",
    "PgOrderAllAttributesPlugin",
    "PgOrderByPrimaryKeyPlugin",
    "PgOrderCustomFieldsPlugin",
    "PgFirstLastBeforeAfterArgsPlugin",
    "PgConnectionTotalCountPlugin",
    "PgMutationCreatePlugin",
    "PgMutationUpdateDeletePlugin",
    "PgMutationPayloadEdgePlugin",
    "PgTableNodePlugin",
    "RegisterQueryNodePlugin",
    "NodeAccessorPlugin",
    "PgNodeIdAttributesPlugin",
    "ClientMutationIdDescriptionPlugin",
    "MutationPayloadQueryPlugin",
    "PgJWTPlugin",
    // PgProceduresPlugin stays: its gather half makes the function resources PgGqlFunctionsPlugin exposes.
    "PgCustomTypeFieldPlugin",
    "PgPolymorphismOnlyArgumentPlugin",
    "PgInterfaceModeUnionAllRowsPlugin",
    "SubscriptionPlugin",
  ],
  grafast: {
    // Planning is synchronous: a plan still being made after this long is abandoned (grafast checks between
    // its planning phases) and the operation answers that error, without planning again, for a minute.
    timeouts: { planning: 2_000 },
    maxPlanningDepth: planningDepthFor(PG_GQL_LIMITS.maxDepth),
  },
  schema: {
    defaultBehavior: "-list -query:resource:list -manyRelation:resource:list -connection:resource:backwards",
    pgForbidSetofFunctionsToReturnNull: false,
  },
};

export default PgGraphqlPreset;
