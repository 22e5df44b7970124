import { z } from "zod";

/** The platform's custom hostname answer (its Cloudflare-shaped `data.result`). */
export const customHostnameResponse = z.object({
  status: z.enum([
    "1_not_started",
    "2_initiated",
    "3_challenge_verified",
    "4_origin_setup_completed",
    "5_services_reconfigured",
  ]),
  custom_hostname: z.string(),
  data: z.object({
    success: z.boolean(),
    errors: z.array(z.unknown()),
    messages: z.array(z.unknown()),
    result: z.object({
      id: z.string(),
      hostname: z.string(),
      ssl: z.object({
        status: z.string(),
        validation_records: z.array(z.object({ txt_name: z.string(), txt_value: z.string() })),
        validation_errors: z.array(z.object({ message: z.string() })),
      }),
      ownership_verification: z.object({ type: z.string(), name: z.string(), value: z.string() }),
      custom_origin_server: z.string(),
      verification_errors: z.array(z.string()),
      status: z.string(),
    }),
  }),
});

export const vanitySubdomainResponse = z.object({
  status: z.enum(["not-used", "active"]),
  custom_domain: z.string().optional(),
});
