import { Button, Card, Center, Container, Group, SimpleGrid, Stack, Text, TextInput, Title } from '@mantine/core';
import { useForm } from '@mantine/form';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, Navigate, useNavigate } from 'react-router';
import { herald } from '../api.ts';
import { LAST_PROJECT_KEY, logout, useProjects } from '../components/ProjectLayout.tsx';
import { showApiError } from '../components/forms.ts';
import { SecretKeyModal } from '../components/SecretKeyModal.tsx';
import { Loading, PageError } from '../components/states.tsx';

/** `/`: the project you used last, or the first one, or the page to create one. */
export function ProjectRedirect() {
  const projects = useProjects();
  if (projects.isPending) return <Loading />;
  if (projects.error) return <PageError error={projects.error} onRetry={() => void projects.refetch()} />;
  const last = localStorage.getItem(LAST_PROJECT_KEY);
  const target = projects.data.find((p) => p.id === last) ?? projects.data[0];
  return <Navigate to={target ? `/p/${target.id}` : '/projects'} replace />;
}

export function ProjectsPage() {
  const projects = useProjects();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const form = useForm({
    mode: 'controlled',
    initialValues: { name: '' },
    validate: { name: (v) => (v.trim() ? null : 'Name your project') },
  });
  // The new project, kept while its secret key is shown (once); closing the key opens the project.
  const [created, setCreated] = useState<{ id: string; secretKey: string | null } | null>(null);
  const create = useMutation({
    mutationFn: (values: { name: string }) => herald.projects.create(values),
    onSuccess: async (project) => {
      await queryClient.invalidateQueries({ queryKey: ['projects'] });
      if (project.secretKey) setCreated(project);
      else navigate(`/p/${project.id}`);
    },
    onError: (err) => showApiError(err, form),
  });

  return (
    <Container size="md" py="xl" component="main">
      <Group justify="space-between" mb="lg">
        <Title order={1} size="h2">
          Projects
        </Title>
        <Button variant="default" size="xs" onClick={() => void logout(navigate, () => queryClient.clear())}>
          Log out
        </Button>
      </Group>
      <Card withBorder mb="xl" padding="lg">
        <form onSubmit={form.onSubmit((v) => create.mutate(v))} noValidate>
          <Stack gap="sm">
            <Text fw={600}>Create a project</Text>
            <Text size="sm" c="dimmed">
              A project holds your contacts, domains, templates and campaigns, and has its own API keys.
            </Text>
            <Group align="flex-start">
              <TextInput label="Project name" placeholder="My product" style={{ flex: 1 }} {...form.getInputProps('name')} />
              <Button type="submit" mt={25} loading={create.isPending}>
                Create project
              </Button>
            </Group>
          </Stack>
        </form>
      </Card>
      {projects.isPending ? (
        <Loading />
      ) : projects.error ? (
        <PageError error={projects.error} onRetry={() => void projects.refetch()} />
      ) : projects.data.length === 0 ? (
        <Center>
          <Text c="dimmed">You have no projects yet: create your first one above.</Text>
        </Center>
      ) : (
        <SimpleGrid cols={{ base: 1, sm: 2, md: 3 }}>
          {projects.data.map((p) => (
            <Card key={p.id} withBorder component={Link} to={`/p/${p.id}`}>
              <Text fw={600}>{p.name}</Text>
              <Text size="sm" c="dimmed">
                {p.role.toLowerCase()}
              </Text>
            </Card>
          ))}
        </SimpleGrid>
      )}
      <SecretKeyModal secretKey={created?.secretKey ?? null} onClose={() => created && navigate(`/p/${created.id}`)} />
    </Container>
  );
}
