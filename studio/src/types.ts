export interface Project {
  id: string;
  ref: string;
  name: string;
  organization_id: string;
  organization_slug?: string;
  region: string;
  status: string;
  created_at: string;
}

export interface Organization {
  id: string;
  slug: string;
  name: string;
}

export interface ApiKey {
  id: string;
  type: "legacy" | "publishable" | "secret";
  name: string;
  api_key: string;
  description?: string | null;
}
