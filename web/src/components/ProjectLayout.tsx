import { AppShell, Box, Burger, Button, Group, NavLink, Select, Text } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { Suspense, useEffect } from 'react';
import { Link, Outlet, useLocation, useNavigate, useParams } from 'react-router';
import { herald, setProject } from '../api.ts';
import type { Project } from '../types.ts';
import { useMe } from './RequireUser.tsx';
import { MAIN_ID, SkipLink } from './SkipLink.tsx';
import { Loading, NotFound, PageError } from './states.tsx';

export const LAST_PROJECT_KEY = 'herald.lastProject';

export function useProjects() {
  return useQuery({ queryKey: ['projects'], queryFn: () => herald.projects.list() });
}

/** ADMIN and OWNER change the project (members, keys, caps, domains, suppressions); a MEMBER reads them. */
export const canManage = (project: Pick<Project, 'role'>): boolean => project.role !== 'MEMBER';

/** The project named in the URL; the layout guarantees it exists. */
export function useProject(): Project {
  const { projectId } = useParams();
  const projects = useProjects();
  const project = projects.data?.find((p) => p.id === projectId);
  if (!project) throw new Error('useProject outside a project page');
  return project;
}

const NAV = [
  { to: '', label: 'Home' },
  { to: 'contacts', label: 'Contacts' },
  { to: 'segments', label: 'Segments' },
  { to: 'campaigns', label: 'Campaigns' },
  { to: 'workflows', label: 'Workflows' },
  { to: 'templates', label: 'Templates' },
  { to: 'domains', label: 'Domains' },
  { to: 'emails', label: 'Emails' },
  { to: 'suppressions', label: 'Suppressions' },
  { to: 'activity', label: 'Activity' },
  { to: 'analytics', label: 'Analytics' },
  { to: 'settings', label: 'Settings' },
];

export async function logout(navigate: (to: string) => void, clear: () => void) {
  await herald.auth.logout().catch(() => undefined);
  setProject(null);
  clear();
  navigate('/login');
}

export function ProjectLayout() {
  const { projectId = '' } = useParams();
  const projects = useProjects();
  const me = useMe();
  const [opened, { toggle, close }] = useDisclosure();
  const navigate = useNavigate();
  const location = useLocation();
  const queryClient = useQueryClient();
  const project = projects.data?.find((p) => p.id === projectId);
  // Set before the pages below render, so their first requests already carry X-Project-Id.
  if (project) setProject(project.id);

  useEffect(() => {
    if (project) localStorage.setItem(LAST_PROJECT_KEY, project.id);
  }, [project]);
  useEffect(close, [location.pathname, close]);

  if (projects.isPending) return <Loading />;
  if (projects.error && !projects.data) return <PageError error={projects.error} onRetry={() => void projects.refetch()} />;
  if (!project) return <NotFound />;

  const base = `/p/${project.id}`;
  const section = location.pathname.slice(base.length + 1).split('/')[0] ?? '';

  return (
    <AppShell header={{ height: 56 }} navbar={{ width: 220, breakpoint: 'sm', collapsed: { mobile: !opened } }} padding="md">
      <SkipLink />
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between" wrap="nowrap">
          <Group gap="sm" wrap="nowrap">
            <Burger opened={opened} onClick={toggle} hiddenFrom="sm" size="sm" aria-label="Toggle navigation" />
            <Text fw={700} size="lg" component={Link} to={base} c="indigo">
              Herald
            </Text>
            <Select
              aria-label="Project"
              data-testid="project-switcher"
              size="xs"
              w={{ base: 140, sm: 220 }}
              allowDeselect={false}
              value={project.id}
              data={[...projects.data.map((p) => ({ value: p.id, label: p.name })), { value: '__new', label: '+ New project' }]}
              onChange={(v) => {
                if (v === '__new') navigate('/projects');
                else if (v) navigate(`/p/${v}`);
              }}
            />
          </Group>
          <Group gap="sm" wrap="nowrap">
            <Text size="sm" c="dimmed" visibleFrom="sm">
              {me.data?.email}
            </Text>
            <Button size="xs" variant="default" onClick={() => void logout(navigate, () => queryClient.clear())}>
              Log out
            </Button>
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs" aria-label="Main">
        {NAV.map((item) => (
          <NavLink key={item.to} component={Link} to={item.to ? `${base}/${item.to}` : base} label={item.label} active={section === item.to} />
        ))}
      </AppShell.Navbar>
      <AppShell.Main id={MAIN_ID} tabIndex={-1} style={{ outline: 'none' }}>
        <Box maw={1200} mx="auto">
          <Suspense fallback={<Loading />}>
            <Outlet key={project.id} />
          </Suspense>
        </Box>
      </AppShell.Main>
    </AppShell>
  );
}
